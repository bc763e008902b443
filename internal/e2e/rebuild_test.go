package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
)

// command runs one operator command of a built binary with the system's settings (its event
// keys included) plus env, as an operator would from a shell, and returns its combined output.
func (s *system) command(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	service := contract.SourceWallet
	if bin == s.bins.GL {
		service = contract.SourceGL
	}
	cmd.Env = slices.Concat(s.common, s.keys.Env(service), env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The GL's reconciliation reads the real wallet (its API, and its database's published view)
// through the binaries; then the wallet's stream is lost: gl replay --from-start says what is
// missing, wallet outbox republish rebuilds the stream from the outbox, the live GL answers the
// events it already posted so the rows come home, and the replay agrees. Last, wallet outbox
// reconcile asks the real GL's API about rows whose answer was lost.
func TestALostStreamIsRebuiltFromTheOutbox(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()
	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	const n = 12
	for i := range n {
		resp, err := s.walletAPI.Transfer(ctx, fmt.Sprintf("rebuild-%d", i),
			systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: int64(100 + i), Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	waitOutbox := func(msg string, done func(open, unpublished int) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			var open, unpublished int
			require.NoError(t, s.walletDB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'acknowledged'),
				count(*) FILTER (WHERE status IN ('pending', 'dispatching', 'failed')) FROM outbox`).Scan(&open, &unpublished))
			return done(open, unpublished)
		}, 60*time.Second, 100*time.Millisecond, msg)
	}
	waitOutbox("every transfer is posted and acknowledged", func(open, _ int) bool { return open == 0 })

	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL, "WALLET_URL=http://" + s.walletAddr}
	walletEnv := []string{"WALLET_DATABASE_URL=" + s.walletDBURL, "GL_URL=http://" + s.glAddr}
	reconciled := fmt.Sprintf("verdict: RECONCILED — %d transfers, %d entries", n, n)
	out, err := s.command(t, s.bins.GL, glEnv, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet's API")
	out, err = s.command(t, s.bins.GL, []string{"GL_DATABASE_URL=" + s.glDBURL, "GL_RECONCILE_WALLET_DATABASE_URL=" + s.walletDBURL}, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet database's view")

	// The stream is lost (as with a broker's store) and comes back empty.
	nc, err := nats.Connect(s.natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := events.Topology{Namespace: s.namespace, MaxBytes: envtest.StreamMaxBytes}
	require.NoError(t, js.DeleteStream(ctx, topo.StreamName(contract.SourceWallet)))
	require.NoError(t, topo.EnsureStreams(ctx, js))

	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
	require.Error(t, err, out)
	require.Contains(t, out, fmt.Sprintf("missing   %d\n", n))
	require.Contains(t, out, fmt.Sprintf("gl: replay: the rebuilt GL does not reconcile with the wallet: %d transfers of the wallet have no entry", n))

	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "republish", "--since", since)
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("%d acknowledged rows created from %s", n, since))
	waitOutbox("the GL answers every republished event it posted before, and the rows come home", func(open, _ int) bool { return open == 0 })

	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("entries posted       %d\n", n))
	require.Contains(t, out, reconciled)

	var entries int
	require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries))
	require.Equal(t, n, entries, "the live GL's inbox recognised every republished event")

	// With the wallet stopped (no relay), rows published whose answer was lost: wallet outbox
	// reconcile asks the GL's API and acknowledges them.
	require.NoError(t, s.wallet.Stop(20*time.Second))
	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "republish", "--since", since)
	require.NoError(t, err, out)
	for _, status := range []string{"dispatching", "dispatched"} {
		_, err = s.walletDB.Exec(ctx, `UPDATE outbox SET status = $1, lease_owner = CASE WHEN $1 = 'dispatching' THEN 'gone' END,
			lease_until = CASE WHEN $1 = 'dispatching' THEN now() END, dispatched_at = now() WHERE status <> 'acknowledged'`, status)
		require.NoError(t, err)
	}
	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("%d acknowledged, 0 not posted by the GL yet", n), "the GL's API says it posted every one")
	waitOutbox("every row is acknowledged", func(open, _ int) bool { return open == 0 })
}

// When retention has taken the events from both the stream and the outbox, the wallet's own
// tables still hold every movement: wallet outbox rebuild re-creates their events under their
// ids, and a GL started on an empty database posts every transfer, reversal, hold, batch and
// batch reversal once and reconciles with the wallet. Before the rebuild, neither the stream nor outbox republish has
// anything to give it.
func TestAFreshGLIsRebuiltFromTheWalletsTablesAfterRetention(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()
	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bob", "USD", false))
	transfer := func(key, from, to string, amount int64) systemtest.Transfer {
		t.Helper()
		resp, err := s.walletAPI.Transfer(ctx, key, systemtest.TransferRequest{FromWalletID: from, ToWalletID: to, Amount: amount, Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var tr systemtest.Transfer
		require.NoError(t, resp.Decode(&tr))
		return tr
	}
	post := func(path, key string, body any) map[string]any {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, path, body, map[string]string{"Idempotency-Key": key})
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, resp.Status, "%s", resp.Body)
		var out map[string]any
		require.NoError(t, resp.Decode(&out))
		return out
	}
	transfer("fund", "bank", "alice", 1000)
	paid := transfer("pay", "alice", "bob", 300)
	resp, err := s.walletAPI.Reverse(ctx, "refund", paid.ID, 100)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	captured := post("/v1/holds", "hold-1", map[string]any{"wallet_id": "alice", "amount": 200, "currency": "USD", "expires_in": 3600})
	post(fmt.Sprintf("/v1/holds/%s/capture", captured["id"]), "capture-1", map[string]any{"to_wallet_id": "bob", "amount": 150})
	voided := post("/v1/holds", "hold-2", map[string]any{"wallet_id": "alice", "amount": 50, "currency": "USD", "expires_in": 3600})
	post(fmt.Sprintf("/v1/holds/%s/void", voided["id"]), "void-2", nil)
	batch := post("/v1/transfer-batches", "batch-1", map[string]any{"transfers": []map[string]any{
		{"from_wallet_id": "alice", "to_wallet_id": "bob", "amount": 40, "currency": "USD"},
		{"from_wallet_id": "bank", "to_wallet_id": "bob", "amount": 25, "currency": "USD"},
	}})
	legs := batch["transfers"].([]any)
	post(fmt.Sprintf("/v1/transfer-batches/%s/reversals", batch["id"]), "batch-undo-1",
		map[string]any{"transfers": []any{legs[1].(map[string]any)["id"]}})

	// 3 transfers and a capture's, a reversal, 2 holds placed, one captured, one voided, a batch
	// and its reversal
	const movementEvents = 10
	outboxCount := func(where string) int {
		t.Helper()
		var n int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE "+where).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return outboxCount("status <> 'acknowledged'") == 0 },
		60*time.Second, 100*time.Millisecond, "every event posted and acknowledged")
	require.Equal(t, movementEvents, outboxCount("true"))
	glEnv := func(dbURL string) []string {
		return []string{"GL_DATABASE_URL=" + dbURL, "WALLET_URL=http://" + s.walletAddr}
	}
	out, err := s.command(t, s.bins.GL, glEnv(s.glDBURL), "reconcile")
	require.NoError(t, err, out)
	verdict := regexp.MustCompile(`verdict: RECONCILED[^\n]*`)
	reconciled := verdict.FindString(out)
	require.NotEmpty(t, reconciled, out)

	// Retention took the acknowledged rows and the stream's limits its events; the GL is to be
	// rebuilt from scratch on an empty database.
	_, err = s.walletDB.Exec(ctx, "DELETE FROM outbox")
	require.NoError(t, err)
	require.NoError(t, s.gl.Stop(20*time.Second))
	nc, err := nats.Connect(s.natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := events.Topology{Namespace: s.namespace, MaxBytes: envtest.StreamMaxBytes}
	require.NoError(t, js.DeleteStream(ctx, topo.StreamName(contract.SourceWallet)))
	require.NoError(t, topo.EnsureStreams(ctx, js))

	freshURL := envtest.DatabaseURL(t)
	glAddr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	fresh := &systemtest.Process{Name: "gl-fresh", Bin: s.bins.GL, Args: []string{"serve"}, Addr: glAddr,
		Log: filepath.Join(t.TempDir(), "gl-fresh.log"),
		Env: slices.Concat([]string{"GL_DATABASE_URL=" + freshURL, "GL_HTTP_ADDR=" + glAddr}, s.keys.Env(contract.SourceGL), s.common)}
	require.NoError(t, fresh.Start())
	t.Cleanup(func() {
		if err := fresh.Stop(20 * time.Second); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
		if t.Failed() {
			t.Logf("%s log tail:\n%s", fresh.Name, fresh.Tail(40))
		}
	})
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, fresh.WaitHealthy(waitCtx))

	walletEnv := []string{"WALLET_DATABASE_URL=" + s.walletDBURL}
	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "republish", "--since", since)
	require.NoError(t, err, out)
	require.Contains(t, out, "0 acknowledged rows created from", "retention left outbox republish nothing")
	out, err = s.command(t, s.bins.GL, glEnv(freshURL), "reconcile")
	require.Error(t, err, "without the rebuild the fresh GL lacks the history:\n%s", out)
	require.Contains(t, out, "MISSING")

	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "rebuild", "--since", since, "--batch", "3")
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("%d events of the movements made from", movementEvents))
	require.Contains(t, out, fmt.Sprintf("re-created pending     %d", movementEvents))
	require.Eventually(t, func() bool {
		return outboxCount("status = 'acknowledged'") == movementEvents
	}, 60*time.Second, 100*time.Millisecond, "the fresh GL posts and acknowledges every rebuilt event")

	out, err = s.command(t, s.bins.GL, glEnv(freshURL), "reconcile")
	require.NoError(t, err, out)
	require.Equal(t, reconciled, verdict.FindString(out), "every movement posted once, as the wallet made it, as in the live GL:\n%s", out)
	for _, c := range []struct{ bin, env string }{{s.bins.GL, "GL_DATABASE_URL=" + freshURL}, {s.bins.Wallet, "WALLET_DATABASE_URL=" + s.walletDBURL}} {
		out, err = s.command(t, c.bin, []string{c.env}, "verify")
		require.NoError(t, err, out)
		require.Contains(t, out, "verdict: PASS")
	}
	var processed int
	require.NoError(t, openPool(t, freshURL).QueryRow(ctx, "SELECT count(*) FROM inbox").Scan(&processed))
	require.Equal(t, movementEvents, processed, "each rebuilt event received once")
}
