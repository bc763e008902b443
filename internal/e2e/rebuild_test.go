package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/harness"
	"walletgl/internal/testenv"
)

// command runs one operator command of a built binary with the system's settings (its event
// keys included) plus env, as an operator would from a shell, and returns its combined output.
func (s *system) command(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	service := events.SourceWallet
	if bin == s.bins.GL {
		service = events.SourceGL
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
			harness.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: int64(100 + i), Currency: "USD"})
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
	topo := events.Topology{Namespace: s.namespace, MaxBytes: testenv.StreamMaxBytes}
	require.NoError(t, js.DeleteStream(ctx, topo.StreamName(events.SourceWallet)))
	require.NoError(t, topo.EnsureStreams(ctx, js))

	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", testenv.DatabaseURL(t))
	require.Error(t, err, out)
	require.Contains(t, out, fmt.Sprintf("missing   %d\n", n))
	require.Contains(t, out, fmt.Sprintf("gl: replay: the rebuilt GL does not reconcile with the wallet: %d transfers of the wallet have no entry", n))

	out, err = s.command(t, s.bins.Wallet, walletEnv, "outbox", "republish", "--since", since)
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("%d acknowledged rows created from %s", n, since))
	waitOutbox("the GL answers every republished event it posted before, and the rows come home", func(open, _ int) bool { return open == 0 })

	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", testenv.DatabaseURL(t))
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
