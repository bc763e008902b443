package e2e_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/systemtest"
)

// updateScreenshots writes the screenshots the docs show (docsShots) to docs/img as well:
// go test -tags slow -run TestTheConsoleInARealBrowser ./internal/e2e/ -args -update-screenshots
// (make screenshots).
var updateScreenshots = flag.Bool("update-screenshots", false, "also write the console's screenshots that docs/console.md shows to docs/img")

// docsShots are the screenshots docs/console.md shows, by the name the test gives them, with
// their file under docs/img.
var docsShots = map[string]string{
	"wallet-overview-healthy":        "console-healthy.png",
	"wallet-outbox-dead-letter":      "console-dead-letter.png",
	"wallet-outbox-row":              "console-outbox-row.png",
	"wallet-outbox-row-acknowledged": "console-requeued.png",
	"wallet-trace":                   "console-trace.png",
	"gl-inbox-waiting":               "console-waiting.png",
	"gl-inbox-failed":                "console-failed.png",
	"gl-inbox-poison":                "console-poison.png",
	"gl-inbox-resolved":              "console-resolved.png",
	"gl-broker":                      "console-broker.png",
}

// maxScreenshotBytes bounds a screenshot the docs keep.
const maxScreenshotBytes = 150 << 10

// TestTheConsoleInARealBrowser drives both services' consoles in headless Chromium as an
// operator would: a wrong key is refused; the healthy overview; a dead-lettered outbox row is
// found, requeued and seen to reach acknowledged, which lets the reversal that waited for its
// transfer post; a failed event no retry can apply is resolved with a reason; the broker page;
// and a transfer is traced end to end through the GL's API. Each state it visits is written as
// a screenshot to the test artifacts (TEST_ARTIFACTS, or a directory under the system's
// temporary directory), and with -update-screenshots those docs/console.md shows to docs/img.
func TestTheConsoleInARealBrowser(t *testing.T) {
	t.Parallel()
	browser := chromiumPath(t)
	s := startSystem(t, "EVENTS_MAX_ATTEMPTS=1")
	restartWalletWithGLKey(t, s)
	ctx := context.Background()
	shots := screenshotDir(t)
	bctx := newBrowser(t, browser)
	wallet, gl := "http://"+s.walletAddr, "http://"+s.glAddr

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	traced := transfer(t, s, "console-traced-1", 2550)
	require.Eventually(t, func() bool {
		var n int
		err := s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&n)
		return err == nil && n == 0
	}, 30*time.Second, 100*time.Millisecond, "every event is home")

	t.Run("a wrong key is refused", func(t *testing.T) {
		resp, err := chromedp.Run(bctx, chromedp.NavigateResponse(wallet+"/console/"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, int(resp.Status), "an anonymous visit lands on the login page")
		require.NoError(t, chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#key"), "wgl_not-a-key-of-this-service")))
		resp, err = chromedp.RunResponse(bctx, chromedp.Click(chromedp.CSS("form.login button")))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, int(resp.Status))
		msg, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#login-msg")))
		require.NoError(t, err)
		require.Contains(t, msg, "not valid")
		require.NotContains(t, pageHTML(t, bctx), "wgl_not-a-key", "the key given is not shown back")
		shoot(t, bctx, shots, "wallet-login-refused")
	})

	t.Run("the overview of a healthy pipeline", func(t *testing.T) {
		login(t, bctx, wallet, s.walletAPI.Key)
		require.NotContains(t, pageHTML(t, bctx), s.walletAPI.Key, "the key is never in a page")
		requireText(t, bctx, `[data-count=outbox-acknowledged]`, "1")
		requireText(t, bctx, `[data-count=inbox-failed]`, "0")
		require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`a[data-remote-health="inbox-failed"]`))))
		requireText(t, bctx, `a[data-remote-health="inbox-failed"] strong`, "0")
		shoot(t, bctx, shots, "wallet-overview-healthy")
	})

	// A transfer whose event the broker refuses (larger than the stream allows, for the while
	// of the test): with one attempt allowed, its row is dead-lettered at once. A reversal of it
	// reaches the GL, which parks it: it waits for the transfer to post.
	setMaxMsgSize(t, s, 200)
	refused := transfer(t, s, "console-refused-1", 700)
	var deadID string
	require.Eventually(t, func() bool {
		err := s.walletDB.QueryRow(ctx, "SELECT id::text FROM outbox WHERE aggregate_id = $1 AND status = 'dead_letter'", refused).Scan(&deadID)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the refused transfer's row is dead-lettered")
	setMaxMsgSize(t, s, -1)
	resp, err := s.walletAPI.Reverse(ctx, "console-reversal-1", refused, 100)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var waitingID string
	require.Eventually(t, func() bool {
		err := s.glDB.QueryRow(ctx, "SELECT id FROM inbox WHERE status = 'waiting' AND waits_for = $1", "transfer:"+refused).Scan(&waitingID)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the reversal waits for its transfer")

	t.Run("a waiting event says what it waits for", func(t *testing.T) {
		login(t, bctx, gl, s.glAPI.Key)
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/inbox/"+waitingID), chromedp.WaitVisible(chromedp.CSS(`[data-field=status]`))))
		requireText(t, bctx, `[data-field=status]`, "waiting")
		require.Contains(t, pageHTML(t, bctx), "transfer:"+refused)
		shoot(t, bctx, shots, "gl-inbox-waiting")
	})

	t.Run("a dead-lettered row is requeued and reaches acknowledged", func(t *testing.T) {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(wallet+"/console/")))
		row := chromedp.CSS(`table.rows a[href="/console/outbox/` + deadID + `"]`)
		// The header's verdict counts the dead letter, coloured, and links to it.
		require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`a.hb.alert[data-health="outbox-dead_letter"]`))))
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`a[data-health="outbox-dead_letter"]`)), chromedp.WaitVisible(row)))
		shoot(t, bctx, shots, "wallet-outbox-dead-letter")
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(row), chromedp.WaitVisible(chromedp.CSS(`[data-field=status]`))))
		requireText(t, bctx, `[data-field=status]`, "dead_letter")
		shoot(t, bctx, shots, "wallet-outbox-row")

		// The requeue asks for a confirmation, then moves the row and says so.
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`form[action="/console/outbox/requeue"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`form.confirm button.danger`))))
		shoot(t, bctx, shots, "wallet-requeue-confirm")
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`form.confirm button.danger`)), chromedp.WaitVisible(chromedp.CSS(`.flash`))))
		requireText(t, bctx, `.flash[data-flash=done]`, "Requeued 1 of 1")

		// The page updates itself: no reload until the GL's acknowledgment has come back.
		_, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('[data-field=status]').textContent === 'acknowledged'`,
			chromedp.WithPollingTimeout(45*time.Second)))
		require.NoError(t, err, "the row reaches acknowledged on the open page")
		shoot(t, bctx, shots, "wallet-outbox-row-acknowledged")

		var action string
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT action FROM audit_log WHERE target = $1", deadID).Scan(&action))
		require.Equal(t, "outbox.requeue", action, "the console's requeue is in the audit trail")
		require.Eventually(t, func() bool {
			var status string
			err := s.glDB.QueryRow(ctx, "SELECT status FROM inbox WHERE id = $1", waitingID).Scan(&status)
			return err == nil && status == "processed"
		}, 30*time.Second, 100*time.Millisecond, "the reversal that waited posts once its transfer has")
	})

	t.Run("a poison event is resolved, not retried", func(t *testing.T) {
		poison := insertGLFailure(t, s, "malformed", "decode event: invalid character 'x' looking for beginning of value")
		insertGLFailure(t, s, "exhausted", "handler failed on 10 deliveries: the database refused the posting")
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/inbox?status=failed"), chromedp.WaitVisible(chromedp.CSS(`table.rows`))))
		require.Contains(t, pageHTML(t, bctx), poison)
		shoot(t, bctx, shots, "gl-inbox-failed")

		// The wallet console's header shows the GL's failed events (its live part reads the GL's
		// metrics again within seconds), linked to the GL console's page of them.
		glFailed := `a.hb.alert[data-remote-health="inbox-failed"]`
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(wallet+"/console/"), chromedp.WaitVisible(chromedp.CSS(glFailed))))
		requireText(t, bctx, glFailed+" strong", "2")
		href, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(glFailed), "href"))
		require.NoError(t, err)
		require.Equal(t, gl+"/console/inbox?status=failed", href.Value)

		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/inbox/"+poison), chromedp.WaitVisible(chromedp.CSS(`[data-field=status]`))))
		html := pageHTML(t, bctx)
		require.NotContains(t, html, "Retry this event", "no retry can apply a malformed event")
		require.Contains(t, html, "Resolve this event")
		shoot(t, bctx, shots, "gl-inbox-poison")

		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`form[action="/console/inbox/resolve"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`form.confirm textarea[name=reason]`)),
			chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "published by a load test against the wrong namespace; nothing to post"),
			chromedp.Click(chromedp.CSS(`form.confirm button.danger`)), chromedp.WaitVisible(chromedp.CSS(`.flash`))))
		requireText(t, bctx, `.flash[data-flash=done]`, "Resolved 1 of 1")
		requireText(t, bctx, `[data-field=status]`, "resolved")
		requireText(t, bctx, `[data-field=resolution]`, "nothing to post")
		shoot(t, bctx, shots, "gl-inbox-resolved")

		var status, action string
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT status FROM inbox WHERE id = $1", poison).Scan(&status))
		require.Equal(t, "resolved", status)
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT action FROM audit_log WHERE target = $1", poison).Scan(&action))
		require.Equal(t, "inbox.resolve", action)
	})

	t.Run("the broker page", func(t *testing.T) {
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav a[href="/console/broker"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-stream="`+s.namespace+`_WALLET_EVENTS"]`))))
		requireText(t, bctx, `[data-consumer=gl] [data-field=pending]`, "0")
		shoot(t, bctx, shots, "gl-broker")
	})

	t.Run("a transfer is traced end to end", func(t *testing.T) {
		// The search box's form asks GET /console/transfers?q=…, which answers with the trace.
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(wallet+"/console/transfers")))
		requireText(t, bctx, `form[role=search] label[for=q]`, "Transfer id or Idempotency-Key")
		stepCtx, cancelStep := context.WithTimeout(bctx, time.Minute)
		defer cancelStep()
		if err := chromedp.Do(stepCtx, chromedp.Navigate(wallet+"/console/transfers?q=console-traced-1"),
			chromedp.WaitVisible(chromedp.CSS(`ol.steps`))); err != nil {
			text, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("the search did not open the trace: %v (the page says: %.500s)", err, text)
		}
		_, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('[data-field=acknowledged-at]') !== null`,
			chromedp.WithPollingTimeout(30*time.Second)))
		require.NoError(t, err, "the trace reaches the acknowledgment")
		html := pageHTML(t, bctx)
		require.Contains(t, html, traced)
		var entryID, eventID string
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT id::text, event_id FROM journal_entries WHERE transfer_id = $1", traced).Scan(&entryID, &eventID))
		requireText(t, bctx, `[data-field=gl-entry]`, entryID)
		require.Contains(t, html, eventID, "the outbox row, whose id is the event's")
		require.NotContains(t, html, "st-waiting", "every step is done")
		shoot(t, bctx, shots, "wallet-trace")
	})

	t.Run("the GL's console shows the ledger and its inbox", func(t *testing.T) {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/")))
		shoot(t, bctx, shots, "gl-overview")
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav a[href="/console/trial-balance"]`)), chromedp.WaitVisible(chromedp.CSS(`table.rows`))))
		require.Contains(t, pageHTML(t, bctx), "balanced")
		shoot(t, bctx, shots, "gl-trial-balance")
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/accounts?code=2010&currency=USD"), chromedp.WaitVisible(chromedp.CSS(`[data-field=balance]`))))
		requireText(t, bctx, `[data-field=balance]`, "31.50") // 700 + 2550 - 100 cents, in dollars
		shoot(t, bctx, shots, "gl-account")
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/inbox?status=processed"), chromedp.WaitVisible(chromedp.CSS(`table.rows`))))
		shoot(t, bctx, shots, "gl-inbox")
	})
	t.Logf("screenshots in %s", shots)
	if *updateScreenshots {
		writeDocsScreenshots(t, shots)
	}
}

// insertGLFailure records a failed event in the GL's inbox as its consumer would (reason, the
// error's text, the raw message) and returns its inbox id.
func insertGLFailure(t *testing.T, s *system, reason, detail string) string {
	t.Helper()
	eventID := uuid.NewString()
	id := "gl:" + eventID
	_, err := s.glDB.Exec(context.Background(), `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, reason, detail, payload, attempts)
		VALUES ($1, 'gl', $2, 'TransferCompleted.v1', 'failed', 42, $3, $4, $5, 1)`,
		id, eventID, reason, detail, []byte(`{"specversion":"1.0","id":"`+eventID+`","type":"TransferCompleted.v1","data":x}`))
	require.NoError(t, err)
	return id
}

// writeDocsScreenshots copies the screenshots docs/console.md shows from dir to docs/img,
// each small enough to keep.
func writeDocsScreenshots(t *testing.T, dir string) {
	t.Helper()
	for shot, file := range docsShots {
		png, err := os.ReadFile(filepath.Join(dir, shot+".png"))
		require.NoError(t, err, "the test took %s", shot)
		require.Less(t, len(png), maxScreenshotBytes, "%s is small enough for the docs", shot)
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "img", file), png, 0o644))
	}
	t.Logf("docs/img updated: %d screenshots", len(docsShots))
}

// chromiumPath finds Debian's chromium. Without one the test is skipped, unless under CI,
// where it must run (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium binary: install Debian's chromium (apt-get install chromium); under CI the browser tests must run")
	}
	t.Skip("no chromium binary (apt-get install chromium)")
	return ""
}

// newBrowser starts headless Chromium with a laptop's window, closed with the test.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1200, 800), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	tctx, cancelTimeout := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate("about:blank")), "start chromium")
	return tctx
}

// login logs in to the console at base with key, as a person would.
func login(t *testing.T, bctx context.Context, base, key string) {
	t.Helper()
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(base+"/console/login"), chromedp.SendKeys(chromedp.CSS("#key"), key)))
	resp, err := chromedp.RunResponse(bctx, chromedp.Click(chromedp.CSS("form.login button")))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, int(resp.Status))
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`form.logout`))))
}

// restartWalletWithGLKey restarts the wallet with a GL key of its own, which exists only once
// the GL has made its database: the wallet's console reads the GL's API (and metrics) with it,
// and needs no more than make run gives it (ledger:read and metrics:read).
func restartWalletWithGLKey(t *testing.T, s *system) {
	t.Helper()
	keyCtx, cancelKey := context.WithTimeout(context.Background(), time.Minute)
	defer cancelKey()
	key, err := s.gl.CreateKey(keyCtx, "ledger:read,metrics:read")
	require.NoError(t, err)
	require.NoError(t, s.wallet.Stop(20*time.Second))
	s.wallet.Env = append(s.wallet.Env, "GL_API_KEY="+key)
	require.NoError(t, s.wallet.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, s.wallet.WaitHealthy(ctx))
}

// setMaxMsgSize changes the limit of the wallet's stream as an operator would (-1: none).
func setMaxMsgSize(t *testing.T, s *system, size int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, s.namespace+"_WALLET_EVENTS")
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgSize = size
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
}

// transfer moves amount from bank to alice and returns the transfer's id.
func transfer(t *testing.T, s *system, key string, amount int64) string {
	t.Helper()
	resp, err := s.walletAPI.Transfer(context.Background(), key, systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: amount, Currency: "USD"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var tr systemtest.Transfer
	require.NoError(t, resp.Decode(&tr))
	return tr.ID
}

func pageHTML(t *testing.T, bctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NoError(t, err)
	return html
}

func requireText(t *testing.T, bctx context.Context, selector, want string) {
	t.Helper()
	got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(selector)))
	require.NoError(t, err)
	require.Contains(t, got, want)
}

// screenshotDir is where the screenshots go: $TEST_ARTIFACTS/console, or under the system's
// temporary directory; kept after the test, as artifacts are.
func screenshotDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "walletgl-test-artifacts")
	}
	dir := filepath.Join(base, "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// shoot writes the browser's window as dir/name.png.
func shoot(t *testing.T, bctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".png"), png, 0o644))
}
