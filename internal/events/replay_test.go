package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// progressLog records what a replay reports, and checks as it goes that done never falls and
// never passes the total.
type progressLog struct {
	t           *testing.T
	mu          sync.Mutex
	done, total uint64
	calls       int
}

func (p *progressLog) update(done, total uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	require.GreaterOrEqual(p.t, done, p.done, "done never falls")
	require.LessOrEqual(p.t, done, total, "done never passes the total")
	p.done, p.total = done, total
	p.calls++
}

// A pipelined replay (small batches, several transactions in flight) over a stream holding
// copies of two events, a malformed event, one signed by the wrong service's key and one
// unsigned: every good event is applied once, the copies are skipped, the three bad ones are
// dead-lettered in the inbox, and the progress ends at the stream's count.
func TestAPipelinedReplayAppliesEachEventOnceAndDeadLettersTheBadOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, "CREATE TABLE applied (event_id text PRIMARY KEY, via text NOT NULL)")
	require.NoError(t, err)
	ids := b.addEvents(t, 50)
	_, err = b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)
	for _, i := range []int{7, 31} {
		row, err := eventsdb.New(b.pool).GetOutbox(ctx, ids[i])
		require.NoError(t, err)
		b.publish(t, contract.SourceWallet, subject, row.Payload, "copy-"+ids[i].String())
	}
	poison := envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "t", FromWalletID: "a", ToWalletID: "b", Amount: -5, Currency: "USD", CreatedAt: time.Now()})
	b.publish(t, contract.SourceWallet, subject, poison, "poison")
	wrongKey := envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "w", FromWalletID: "a", ToWalletID: "b", Amount: 5, Currency: "USD", CreatedAt: time.Now()})
	b.publish(t, contract.SourceGL, subject, wrongKey, "wrong-key")
	unsigned := nats.NewMsg(subject)
	unsigned.Data = envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "u", FromWalletID: "a", ToWalletID: "b", Amount: 5, Currency: "USD", CreatedAt: time.Now()})
	_, err = b.js.PublishMsg(ctx, unsigned, jetstream.WithMsgID("unsigned"))
	require.NoError(t, err)

	cons := b.consumer(t, "gl", recordingHandler{})
	progress := &progressLog{t: t}
	require.NoError(t, cons.Replay(ctx, inbox.ReplayOptions{BatchSize: 4, Concurrency: 3}, progress.update))

	s := cons.Stats()
	require.Equal(t, inbox.ConsumerStats{Processed: 50, Duplicates: 2, Failed: 3, Unauthenticated: 2}, s)
	require.Equal(t, uint64(55), progress.done)
	require.Equal(t, uint64(55), progress.total)
	var applied, processed, failed int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM applied").Scan(&applied))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'processed'), count(*) FILTER (WHERE status = 'failed')
		FROM inbox WHERE consumer = 'gl'`).Scan(&processed, &failed))
	require.Equal(t, 50, applied, "every good event applied once (the primary key would refuse a second)")
	require.Equal(t, 50, processed)
	require.Equal(t, 3, failed)
	row, err := eventsdb.New(b.pool).GetInbox(ctx, "gl:"+envelopeID(t, poison))
	require.NoError(t, err)
	require.Equal(t, contract.ReasonMalformed, *row.Reason)

	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	var consumers []string
	for name := range stream.ConsumerNames(ctx).Name() {
		consumers = append(consumers, name)
	}
	require.Empty(t, consumers, "the replay's consumer is gone")
}

// A replay cancelled after its first batch committed leaves whole batches: each applied event
// has its inbox row processed, and nothing else was applied. A second replay into the same
// database applies the rest, and skips what the first one applied.
func TestACancelledReplayLeavesWholeBatchesThatAnotherReplayCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, "CREATE TABLE applied (event_id text PRIMARY KEY, via text NOT NULL)")
	require.NoError(t, err)
	const n, batch = 60, 5
	b.addEvents(t, n)
	_, err = b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	defer cancel()
	first := b.consumer(t, "gl", recordingHandler{})
	err = first.Replay(cancelled, inbox.ReplayOptions{BatchSize: batch, Concurrency: 2}, func(done, _ uint64) {
		if done > 0 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)

	var applied, processed int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM applied").Scan(&applied))
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM inbox WHERE consumer = 'gl' AND status = 'processed'").Scan(&processed))
	require.Positive(t, applied)
	require.Less(t, applied, n, "the replay stopped before the end")
	require.Equal(t, processed, applied, "what was applied is exactly what the inbox holds processed")
	require.Zero(t, applied%batch, "batches commit whole")
	require.Equal(t, int64(applied), first.Stats().Processed)

	second := b.consumer(t, "gl", recordingHandler{})
	progress := &progressLog{t: t}
	require.NoError(t, second.Replay(ctx, inbox.ReplayOptions{}, progress.update))
	require.Equal(t, int64(n-applied), second.Stats().Processed)
	require.Equal(t, int64(applied), second.Stats().Duplicates)
	require.Equal(t, uint64(n), progress.done)
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM applied").Scan(&applied))
	require.Equal(t, n, applied)
}
