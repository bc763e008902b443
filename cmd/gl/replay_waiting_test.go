package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
)

// A stream whose reversal and hold release wait for originals it no longer holds: the replay
// ends (it ran for ever, the two redelivered without end), posts what it can, a reversal
// that came before its transfer included, and lists the two still waiting with what they
// wait for.
func TestReplayWithEventsWaitingForMissingOriginalsEndsAndListsThem(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	b.live, b.liveURL = envtest.MigratedPool(t, "gl")
	now := time.Now().UTC()
	publish := func(typ, subject string, data any) string {
		id := uuid.NewString()
		b.publishEvent(t, id, typ, subject, data, id)
		return id
	}
	// The reversal before its transfer: it waits, then posts once the transfer does.
	publish(contract.TypeTransferReversed, "rv-late", contract.TransferReversed{
		ReversalID: "rv-late", TransferID: "tr-posted", FromWalletID: "w-b", ToWalletID: "w-a", Amount: 40, Currency: "USD", CreatedAt: now})
	publish(contract.TypeTransferCompleted, "tr-posted", contract.TransferCompleted{
		TransferID: "tr-posted", FromWalletID: "w-a", ToWalletID: "w-b", Amount: 100, Currency: "USD", CreatedAt: now})
	orphanReversal := publish(contract.TypeTransferReversed, "rv-orphan", contract.TransferReversed{
		ReversalID: "rv-orphan", TransferID: "tr-aged-out", FromWalletID: "w-b", ToWalletID: "w-a", Amount: 10, Currency: "USD", CreatedAt: now})
	orphanVoid := publish(contract.TypeHoldVoided, "h-purged", contract.HoldVoided{
		HoldID: "h-purged", WalletID: "w-a", Amount: 30, Currency: "USD", Reason: contract.VoidExpired, CreatedAt: now})

	target := envtest.DatabaseURL(t)
	out, _, err := runGL(t, b.env(b.liveURL), "replay", "--from-start", "--batch", "1", "--concurrency", "3", "--no-reconcile", "--into", target)
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       2\n", "the transfer and the reversal that came before it")
	require.Contains(t, out, "still waiting        2 ")
	require.Contains(t, out, "gl:"+orphanReversal+" (TransferReversed.v1) waits for transfer:tr-aged-out\n")
	require.Contains(t, out, "gl:"+orphanVoid+" (HoldVoided.v1) waits for hold:h-purged\n")
}
