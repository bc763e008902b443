package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/systemtest"
)

// Reproduction (a): the wallet's inbox is unavailable (locked) while the wallet runs,
// for longer than the ack wait × max deliver after which the broker used to give up on the
// GL's acknowledgments. The ack floor then passed them, the GL's rows were acknowledged, and
// the wallet's rows stayed dispatched for ever: catch-up re-published them and the GL's inbox
// skipped each copy as a duplicate. Now the broker never gives up, and the GL answers a
// duplicate of a posted event again, so every row in both services ends acknowledged.
func TestAcknowledgmentsTheWalletCouldNotTakeArriveOnceItCan(t *testing.T) {
	t.Parallel()
	s := startSystem(t, "EVENTS_ACK_WAIT=1s", "EVENTS_MAX_DELIVER=2", "EVENTS_ACK_TIMEOUT=3s")
	ctx := context.Background()
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "funding", "EUR", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "EUR", false))

	lock, err := s.walletDB.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback(context.WithoutCancel(ctx)) })
	_, err = lock.Exec(ctx, "LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	const n = 20
	for i := range n {
		resp, err := s.walletAPI.Transfer(ctx, fmt.Sprintf("ack-loss-%d", i),
			systemtest.TransferRequest{FromWalletID: "funding", ToWalletID: "alice", Amount: int64(100 + i), Currency: "EUR"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "the API keeps working: %s", resp.Body)
	}
	require.Eventually(t, func() bool {
		var posted int
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&posted))
		return posted == n
	}, 30*time.Second, 100*time.Millisecond, "the GL posts while the wallet's inbox is away")
	// Well past ack wait × max deliver of the acknowledgments' deliveries.
	time.Sleep(6 * time.Second)
	require.NoError(t, lock.Rollback(ctx))

	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 200*time.Millisecond, "every wallet outbox row ends acknowledged")
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 200*time.Millisecond, "every GL outbox row ends acknowledged")
	var failed int
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM inbox WHERE status = 'failed'").Scan(&failed))
	require.Zero(t, failed, "a database that was away made no event fail")
}
