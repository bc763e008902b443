package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/systemtest"
)

// The services start and take transfers while no broker answers, report the degraded state on
// /healthz, and drain the backlog once the broker is there.
func TestServicesServeBeforeTheBrokerExistsAndDrainWhenItComes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The broker is a nats-server process, stopped before the services start and started again
	// on its port later. Not the embedded one: when it comes, both services create and update
	// streams and consumers at once, and nats-server v2.15.3 has a data race between a stream's
	// update and a consumer's creation (fileStore.UpdateConfig / ConsumerStore) that the race
	// detector reports in the test binary, failing every test running at the time.
	dir := t.TempDir()
	bin, err := systemtest.NATSServerBinary(ctx, dir)
	require.NoError(t, err)
	brokers, err := systemtest.StartBrokers(ctx, bin, dir, 1)
	require.NoError(t, err)
	broker := brokers[0]
	t.Cleanup(func() { _ = broker.Kill() })
	require.NoError(t, broker.Stop(10*time.Second))
	s := startSystemOn(t, broker.URL(), false)

	require.Eventually(t, func() bool {
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/healthz", nil, nil)
		return err == nil && resp.Status == http.StatusServiceUnavailable &&
			strings.Contains(string(resp.Body), `"nats":"unavailable"`)
	}, 30*time.Second, 50*time.Millisecond, "health names the missing broker in its 503")

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	for i := range 20 {
		resp, err := s.walletAPI.Transfer(ctx, fmt.Sprintf("offline-%d", i),
			systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: 5, Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "transfers commit while the broker is away: %s", resp.Body)
	}
	var pending int
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0").Scan(&pending))
	require.Equal(t, 20, pending, "no attempts are burnt while the broker is unreachable")

	require.NoError(t, broker.Restart(ctx))
	require.NoError(t, s.wallet.WaitHealthy(ctx))
	require.Eventually(t, func() bool {
		var open, entries int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries))
		return open == 0 && entries == 20
	}, 60*time.Second, 100*time.Millisecond, "the backlog drains once the broker answers")
}
