package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/harness"
	"walletgl/internal/testenv"
)

// The services start and take transfers while no broker answers, report the degraded state on
// /healthz, and drain the backlog once the broker is there.
func TestServicesServeBeforeTheBrokerExistsAndDrainWhenItComes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr, err := harness.FreeAddr()
	require.NoError(t, err)
	_, portText, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	s := startSystemOn(t, "nats://"+addr, false)

	require.Eventually(t, func() bool {
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/healthz", nil, nil)
		return err == nil && resp.Status == http.StatusServiceUnavailable &&
			strings.Contains(string(resp.Body), `"nats":"unavailable"`)
	}, 30*time.Second, 50*time.Millisecond, "health names the missing broker in its 503")

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	for i := range 20 {
		resp, err := s.walletAPI.Transfer(ctx, fmt.Sprintf("offline-%d", i),
			harness.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: 5, Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "transfers commit while the broker is away: %s", resp.Body)
	}
	var pending int
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0").Scan(&pending))
	require.Equal(t, 20, pending, "no attempts are burnt while the broker is unreachable")

	testenv.StartBrokerOn(t, port)
	require.NoError(t, s.wallet.WaitHealthy(ctx))
	require.Eventually(t, func() bool {
		var open, entries int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries))
		return open == 0 && entries == 20
	}, 60*time.Second, 100*time.Millisecond, "the backlog drains once the broker answers")
}
