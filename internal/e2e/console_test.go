package e2e_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/systemtest"
)

// TestTheConsoleInARealBrowser drives both services' consoles in headless Chromium as an
// operator would: a wrong key is refused, a dead-lettered outbox row is found, requeued and
// seen to reach acknowledged, and a transfer is traced end to end through the GL's API. Each
// page it visits is written as a screenshot to the test artifacts (TEST_ARTIFACTS, or a
// directory under the system's temporary directory).
func TestTheConsoleInARealBrowser(t *testing.T) {
	t.Parallel()
	browser := chromiumPath(t)
	s := startSystem(t, "EVENTS_MAX_ATTEMPTS=1")
	restartWalletWithGLKey(t, s)
	ctx := context.Background()
	shots := screenshotDir(t)

	// A transfer whose event the broker refuses (larger than the stream allows, for the while
	// of the test): with one attempt allowed, its row is dead-lettered at once.
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	setMaxMsgSize(t, s, 200)
	refused := transfer(t, s, "console-refused-1", 700)
	var deadID string
	require.Eventually(t, func() bool {
		err := s.walletDB.QueryRow(ctx, "SELECT id::text FROM outbox WHERE aggregate_id = $1 AND status = 'dead_letter'", refused).Scan(&deadID)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the refused transfer's row is dead-lettered")
	setMaxMsgSize(t, s, -1)
	traced := transfer(t, s, "console-traced-1", 2550)

	bctx := newBrowser(t, browser)
	wallet, gl := "http://"+s.walletAddr, "http://"+s.glAddr

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

	t.Run("a dead-lettered row is requeued and reaches acknowledged", func(t *testing.T) {
		login(t, bctx, wallet, s.walletAPI.Key)
		require.NotContains(t, pageHTML(t, bctx), s.walletAPI.Key, "the key is never in a page")
		shoot(t, bctx, shots, "wallet-overview")

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
		requireText(t, bctx, `.flash`, "Requeued 1 of 1")

		// The page updates itself: no reload until the GL's acknowledgment has come back.
		_, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('[data-field=status]').textContent === 'acknowledged'`,
			chromedp.WithPollingTimeout(45*time.Second)))
		require.NoError(t, err, "the row reaches acknowledged on the open page")
		shoot(t, bctx, shots, "wallet-outbox-row-acknowledged")

		var action string
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT action FROM audit_log WHERE target = $1", deadID).Scan(&action))
		require.Equal(t, "outbox.requeue", action, "the console's requeue is in the audit trail")
	})

	t.Run("a transfer is traced end to end", func(t *testing.T) {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(wallet+"/console/transfers"),
			chromedp.SendKeys(chromedp.CSS("#q"), "console-traced-1"), chromedp.Submit(chromedp.CSS("#q")),
			chromedp.WaitVisible(chromedp.CSS(`ol.steps`))))
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
		login(t, bctx, gl, s.glAPI.Key)
		shoot(t, bctx, shots, "gl-overview")
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav a[href="/console/trial-balance"]`)), chromedp.WaitVisible(chromedp.CSS(`table.rows`))))
		require.Contains(t, pageHTML(t, bctx), "balanced")
		shoot(t, bctx, shots, "gl-trial-balance")
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/accounts?code=2010&currency=USD"), chromedp.WaitVisible(chromedp.CSS(`[data-field=balance]`))))
		requireText(t, bctx, `[data-field=balance]`, "32.50") // 700 + 2550 cents, in dollars
		shoot(t, bctx, shots, "gl-account")
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(gl+"/console/inbox?status=processed"), chromedp.WaitVisible(chromedp.CSS(`table.rows`))))
		shoot(t, bctx, shots, "gl-inbox")
	})
	t.Logf("screenshots in %s", shots)
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
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1366, 900), chromedp.Flag("disable-dev-shm-usage", true))
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
