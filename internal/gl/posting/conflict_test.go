package posting_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl/posting"
)

// Through the real consumer, inbox and JetStream: a signed event with a new event id for a
// transfer posted before, with the same figures, is recorded failed as a conflict (never
// acknowledged as processed without an entry), and gl verify agrees with the consumer.
func TestTheGLConsumerRecordsAnotherEventForAPostedTransferAsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	br := newLiveBroker(t)
	topo, keys, log, nc, publish := br.topo, br.keys, br.log, br.nc, br.publish

	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: keys.Trust},
		topo, nc, b.pool, posting.New(b.ledger, log), log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })

	transferID := newTransferID()
	first := transferCompleted(t, transferID, 700, "USD")
	second := transferCompleted(t, transferID, 700, "USD") // same figures, another event id
	publish(first)
	require.Eventually(t, func() bool { return cons.Stats().Processed == 1 }, 60*time.Second, 20*time.Millisecond)
	publish(second)
	require.Eventually(t, func() bool { return cons.Stats().Failed == 1 }, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()
	require.Equal(t, int64(1), cons.Stats().Processed, "the second event is not processed")

	var status, reason string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT status, reason FROM inbox WHERE id = $1", "gl:"+second.ID).Scan(&status, &reason))
	require.Equal(t, "failed", status)
	require.Equal(t, contract.ReasonConflict, reason)
	stats, err := admin.New(b.pool).InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.FailedByReason[contract.ReasonConflict], "inbox status shows it")

	entries, err := b.ledger.EntriesByTransfer(ctx, transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, first.ID, entries[0].EventID)
	acks := b.acknowledgments(t)
	require.Len(t, acks, 1, "only the first event is acknowledged")
	require.Equal(t, first.ID, acks[0].SourceEventID)

	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failures, "gl verify agrees with the consumer: %s: %v", c.Name, c.Offenders)
	}
}
