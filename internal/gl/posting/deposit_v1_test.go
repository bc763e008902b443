package posting_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/posting"
)

// movement is a TransferCompleted of eventType (v1, or v2 of kind) between two named wallets.
func movement(t *testing.T, eventType, kind, from, to string, amount int64) contract.Envelope {
	t.Helper()
	transferID := newTransferID()
	data, err := json.Marshal(contract.TransferCompleted{
		TransferID: transferID, FromWalletID: from, ToWalletID: to, Amount: amount, Currency: "USD",
		Kind: kind, CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}.AsVersion(eventType))
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: eventType, Subject: transferID, Time: time.Now().UTC(),
		DataContentType: "application/json", Data: data,
	}
}

// Through the real consumer, inbox and JetStream: the GL posts a TransferCompleted.v1 by the
// deposit rule only while its wallets fit a deposit. A v1 from a wallet the ledger knows as a
// customer's (a transfer sent as v1 by an older wallet), or to a wallet it knows as external
// from one it does not (a withdrawal), is recorded failed as a conflict, never posted as debit
// 1010 / credit 2010 and never acknowledged; inbox status counts it, gl verify agrees.
func TestTheGLConsumerRefusesAV1ThatIsNoDeposit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	br := newLiveBroker(t)

	spec, err := br.topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: br.keys.Trust},
		br.topo, br.nc, b.pool, posting.New(b.ledger, br.log), br.log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	// Each event goes alone, after the one before it is recorded: what the ledger knows of a
	// wallet is what it posted before.
	var processed, failed int64
	send := func(env contract.Envelope, posts bool) {
		t.Helper()
		br.publish(env)
		if posts {
			processed++
		} else {
			failed++
		}
		require.Eventually(t, func() bool {
			s := cons.Stats()
			return s.Processed == processed && s.Failed == failed
		}, 60*time.Second, 20*time.Millisecond, "event %s (%s)", env.ID, env.Type)
	}

	v2 := contract.TypeTransferCompletedV2
	v1 := contract.TypeTransferCompleted
	send(movement(t, v2, contract.KindDeposit, "funding", "alice", 1000), true)
	send(movement(t, v2, contract.KindTransfer, "alice", "bob", 300), true)
	send(movement(t, v2, contract.KindWithdrawal, "bob", "payout", 100), true)
	deposit := movement(t, v1, "", "funding", "carol", 500) // a deposit, as the wallet sends it today
	send(deposit, true)
	fresh := movement(t, v1, "", "mint", "dan", 70) // wallets the ledger has not seen: a deposit as far as it knows
	send(fresh, true)
	transfer := movement(t, v1, "", "alice", "bob", 50) // an older wallet's transfer
	send(transfer, false)
	withdrawal := movement(t, v1, "", "erin", "payout", 20) // an older wallet's withdrawal
	send(withdrawal, false)

	for _, tc := range []struct {
		name string
		env  contract.Envelope
		says string
	}{
		{"a v1 from a customer's wallet", transfer, "which the ledger knows as a customer's wallet"},
		{"a v1 to an external wallet from a wallet not known as one", withdrawal, "it is a withdrawal"},
	} {
		var status, reason, detail string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT status, reason, detail FROM inbox WHERE id = $1", "gl:"+tc.env.ID).Scan(&status, &reason, &detail))
		require.Equal(t, "failed", status, tc.name)
		require.Equal(t, contract.ReasonConflict, reason, tc.name)
		require.Contains(t, detail, tc.says, tc.name)
		entries, err := b.ledger.EntriesByEvent(ctx, tc.env.ID)
		require.NoError(t, err)
		require.Empty(t, entries, "%s is not posted", tc.name)
	}
	posted, err := b.ledger.EntriesByEvent(ctx, deposit.ID)
	require.NoError(t, err)
	require.Len(t, posted, 1)
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Debit, Amount: 500, WalletID: "funding"},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 500, WalletID: "carol"},
	}, posted[0].Lines, "a v1 that fits a deposit is posted as one")

	stats, err := admin.New(b.pool).InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), stats.FailedByReason[contract.ReasonConflict], "inbox status shows them")
	acked := map[string]bool{}
	for _, a := range b.acknowledgments(t) {
		acked[a.SourceEventID] = true
	}
	require.Len(t, acked, 5, "the five posted events are acknowledged")
	require.False(t, acked[transfer.ID])
	require.False(t, acked[withdrawal.ID])

	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failures, "gl verify agrees with the consumer: %s: %v", c.Name, c.Offenders)
	}
}

// An event in a code that is no ISO 4217 currency is never posted: the consumer records it
// failed as malformed and does not acknowledge it.
func TestTheGLConsumerNeverPostsAnEventInAnUnknownCurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	br := newLiveBroker(t)
	spec, err := br.topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: br.keys.Trust},
		br.topo, br.nc, b.pool, posting.New(b.ledger, br.log), br.log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })

	zzz := transferCompleted(t, newTransferID(), 500, "ZZZ")
	br.publish(zzz)
	require.Eventually(t, func() bool { return cons.Stats().Failed == 1 }, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	var status, reason string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT status, reason FROM inbox WHERE id = $1", "gl:"+zzz.ID).Scan(&status, &reason))
	require.Equal(t, "failed", status)
	require.Equal(t, contract.ReasonMalformed, reason)
	require.Zero(t, cons.Stats().Processed)
	entries, err := b.ledger.EntriesByEvent(ctx, zzz.ID)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Empty(t, b.acknowledgments(t))
}
