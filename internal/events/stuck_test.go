package events_test

// Regressions of the four ways an event got stuck: each test fails on the code
// before the fix.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// addTyped writes n wallet outbox rows of an event type of the caller's choosing.
func (b *testBundle) addTyped(t *testing.T, eventType string, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		_, err := outbox.New(contract.SourceWallet).Add(ctx, b.pool, outbox.Event{
			ID: ids[i], Type: eventType, AggregateID: "t", Time: time.Now(), Data: map[string]int{"n": i},
		})
		require.NoError(t, err)
	}
	return ids
}

// addAcks writes n TransferPosted.v1 rows into the outbox, as the GL does.
func (b *testBundle) addAcks(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		_, err := outbox.New(contract.SourceGL).Add(ctx, b.pool, outbox.Event{
			ID: ids[i], Type: contract.TypeTransferPosted, AggregateID: "t", Time: time.Now(),
			Data: contract.TransferPosted{TransferID: "t", SourceEventID: uuid.NewString(), EntryID: uuid.NewString(), PostedAt: time.Now()},
		})
		require.NoError(t, err)
	}
	return ids
}

// glRelay is the GL's relay: its rows are acknowledged by the wallet consumer's ack floor.
func (b *testBundle) glRelay(t *testing.T, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	cfg.Source, cfg.AckConsumer, cfg.Signer = contract.SourceGL, events.ConsumerWallet, b.keys.GL
	r, err := outbox.NewRelay(cfg, b.topo, b.pool, b.nc, b.log)
	require.NoError(t, err)
	return r
}

var walletSpec = events.ConsumerSpec{
	Name: events.ConsumerWallet, Source: contract.SourceGL, EventType: contract.TypeTransferPosted, AckWait: 5 * time.Second,
}

// ackAll fetches n messages from cons and acknowledges each.
func ackAll(t *testing.T, cons jetstream.Consumer, n int) {
	t.Helper()
	got := 0
	for got < n {
		batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		before := got
		for msg := range batch.Messages() {
			require.NoError(t, msg.DoubleAck(context.Background()))
			got++
		}
		require.Greater(t, got, before, "no message to acknowledge")
	}
}

func (b *testBundle) outboxStatus(t *testing.T, id uuid.UUID) eventsdb.Outbox {
	t.Helper()
	row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), id)
	require.NoError(t, err)
	return row
}

// 1b. An operator purges the GL's stream: the wallet consumer's ack floor moves past messages
// it never read. Those rows are not acknowledged; catch-up publishes them again, and they are
// acknowledged once the wallet's consumer has acknowledged the copies.
func TestAPurgedStreamAcknowledgesNothingTheConsumerDidNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addAcks(t, 3)
	relay := b.glRelay(t, outbox.RelayConfig{AckTimeout: 100 * time.Millisecond})
	n, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	cons, err := b.topo.EnsureConsumer(ctx, b.js, walletSpec)
	require.NoError(t, err)
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceGL))
	require.NoError(t, err)
	// A short duplicate window, so that the re-publishes below are stored soon: the broker
	// drops a re-published message id inside its window even when the message was purged.
	b.editStream(t, contract.SourceGL, func(c *jetstream.StreamConfig) { c.Duplicates = 500 * time.Millisecond })
	require.NoError(t, stream.Purge(ctx))
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(3), info.AckFloor.Stream, "precondition: the purge moved the ack floor past unread messages")

	acked, err := relay.AcknowledgeAppliedOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, acked)
	for _, id := range ids {
		require.Equal(t, "dispatched", b.outboxStatus(t, id).Status)
	}

	// Catch-up publishes the rows again (the duplicate window absorbs them at first); once the wallet's consumer has acknowledged the copies, they are acknowledged.
	require.Eventually(t, func() bool {
		_, err := relay.CatchUpOnce(ctx)
		require.NoError(t, err)
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		return info.State.Msgs == 3
	}, 30*time.Second, 200*time.Millisecond)
	ackAll(t, cons, 3)
	require.Eventually(t, func() bool {
		acked, err = relay.AcknowledgeAppliedOnce(ctx)
		require.NoError(t, err)
		return b.statusCounts(t)["acknowledged"] == 3
	}, 10*time.Second, 50*time.Millisecond)
}

// 1c. The broker loses its store and a fresh stream gives the row's sequence to another
// message, which the wallet's consumer acknowledges; the relay's mark of the row landed after
// the new stream was created. The row is not acknowledged: another message is stored there.
func TestAReusedSequenceAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	broker := envtest.StartBroker(t)
	pool, _ := envtest.MigratedPool(t, "wallet")
	b := setupWithNATS(t, pool, broker.URL())
	ctx := context.Background()
	ids := b.addAcks(t, 1)
	relay := b.glRelay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), *b.outboxStatus(t, ids[0]).StreamSeq)

	broker.Wipe()
	require.Eventually(t, b.nc.IsConnected, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, b.topo.EnsureStreams(ctx, b.js))
	cons, err := b.topo.EnsureConsumer(ctx, b.js, walletSpec)
	require.NoError(t, err)
	other := uuid.NewString()
	_, err = b.js.Publish(ctx, b.topo.Subject(contract.SourceGL, contract.TypeTransferPosted), []byte(`{}`), jetstream.WithMsgID(other))
	require.NoError(t, err)
	ackAll(t, cons, 1)
	_, err = b.pool.Exec(ctx, "UPDATE outbox SET dispatched_at = clock_timestamp() WHERE id = $1", ids[0])
	require.NoError(t, err)

	acked, err := relay.AcknowledgeAppliedOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, acked)
	require.Equal(t, "dispatched", b.outboxStatus(t, ids[0]).Status)
}

// A duplicate of an event the inbox processed is handed to an inbox.DuplicateHandler, which answers
// it again (the GL writes a fresh acknowledgment); a duplicate of an event recorded failed is
// not.
func TestADuplicateOfAProcessedEventIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addEvents(t, 3)
	failedID := b.addEvents(t, 1)[0]
	require.NoError(t, eventsdb.New(b.pool).RecordInboxFailure(ctx, eventsdb.RecordInboxFailureParams{
		ID: "gl:" + failedID.String(), Consumer: "gl", EventID: failedID.String(), EventType: contract.TypeTransferCompleted,
		Reason: contract.ReasonConflict, Detail: "contradicts a posting", Attempts: 1,
	}))
	_, err := b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)

	h := &answering{}
	c := b.consumer(t, "gl", h)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Processed == 3 && c.Stats().Duplicates == 1 }, 15*time.Second, 20*time.Millisecond)
	require.Empty(t, h.answered(), "the first delivery of a failed event is not answered")

	// The producer publishes every event again, as its catch-up does when no answer arrived.
	rows, err := eventsdb.New(b.pool).ListOutbox(ctx, eventsdb.ListOutboxParams{Status: "dispatched", RowLimit: 10})
	require.NoError(t, err)
	for _, row := range rows {
		b.publish(t, contract.SourceWallet, b.topo.Subject(contract.SourceWallet, row.EventType), row.Payload, uuid.NewString())
	}
	require.Eventually(t, func() bool { return c.Stats().Duplicates == 5 }, 15*time.Second, 20*time.Millisecond)
	stop()
	want := []string{ids[0].String(), ids[1].String(), ids[2].String()}
	require.ElementsMatch(t, want, h.answered())
	require.Equal(t, int64(3), c.Stats().Processed)
}

// answering is a handler that records the duplicates it is asked to answer.
type answering struct {
	mu  sync.Mutex
	ids []string
}

func (a *answering) Handle(context.Context, pgx.Tx, []contract.Envelope) error { return nil }

func (a *answering) HandleDuplicates(_ context.Context, _ pgx.Tx, envs []contract.Envelope) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, env := range envs {
		a.ids = append(a.ids, env.ID)
	}
	return nil
}

func (a *answering) answered() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// 2. Two PubAcks of one round are lost (the broker takes the publishes and never answers, as
// when a stream leader dies with them in flight while the client stays connected): the round
// ends at the publish timeout, the two rows go back to pending without spending an attempt,
// and the row whose PubAck came is dispatched.
func TestTwoLostPubAcksInOneRoundEndTheRound(t *testing.T) {
	t.Parallel()
	broker := envtest.StartBroker(t)
	pool, _ := envtest.MigratedPool(t, "wallet")
	b := setupWithNATS(t, pool, broker.URL())
	ctx := context.Background()
	const lostType = "Lost.v1"
	broker.MapSubject(b.topo.Subject(contract.SourceWallet, lostType), "lost.sink")
	sink, err := b.nc.SubscribeSync("lost.sink") // takes the publishes and never answers
	require.NoError(t, err)
	lost := b.addTyped(t, lostType, 2)
	kept := b.addEvents(t, 1)

	relay := b.relay(t, outbox.RelayConfig{PublishTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := relay.DispatchOnce(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err, "the lost PubAcks are the broker's failure")
	case <-time.After(30 * time.Second):
		t.Fatal("the publish round never ended")
	}
	for range lost {
		_, err := sink.NextMsg(5 * time.Second)
		require.NoError(t, err, "the publish reached the broker")
	}
	for _, id := range lost {
		row := b.outboxStatus(t, id)
		require.Equal(t, "pending", row.Status)
		require.Zero(t, row.Attempts)
	}
	require.Equal(t, "dispatched", b.outboxStatus(t, kept[0]).Status)
	require.NoError(t, relay.Health(), "a round that ended is no stalled loop")

	// Lost PubAcks must not stay pending in the client: past its bound of pending publishes
	// (2 × workers × batch + catch-up, 21 here) every later publish would stall for good.
	small := b.relay(t, outbox.RelayConfig{PublishTimeout: 100 * time.Millisecond, Workers: 1, BatchSize: 10, CatchUpLimit: 1})
	for range 12 { // 24 lost PubAcks, more than the bound
		_, err := small.DispatchOnce(ctx)
		require.Error(t, err)
	}
	later := b.addEvents(t, 1)
	_, err = small.DispatchOnce(ctx)
	require.Error(t, err, "the lost rows are still lost")
	require.Equal(t, "dispatched", b.outboxStatus(t, later[0]).Status, "a later row is still published")
}

// 3. A stream an operator set to refuse new messages (discard policy new at a message limit,
// as a store that is full refuses them) refuses every publish: a broker-wide condition, so no
// row spends an attempt or is dead-lettered, and the relay reports it in health; once space is
// freed, every row is published exactly once.
func TestAFullStreamDeadLettersNothingAndPublishesEverythingOnceWhenFreed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.addEvents(t, 1)
	relay := b.relay(t, outbox.RelayConfig{MaxAttempts: 2, PublishTimeout: 100 * time.Millisecond})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	full := func(c *jetstream.StreamConfig) { c.Discard, c.MaxMsgs = jetstream.DiscardNew, int64(info.State.Msgs) } // at its limit, refusing new messages
	b.editStream(t, contract.SourceWallet, full)

	b.addEvents(t, 20)
	for range 4 {
		_, err := relay.DispatchOnce(ctx)
		require.ErrorContains(t, err, "maximum messages")
	}
	counts := b.statusCounts(t)
	require.Equal(t, int64(20), counts["pending"])
	require.Zero(t, counts["failed"]+counts["dead_letter"])
	var spent int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE attempts > 0 AND status = 'pending'").Scan(&spent))
	require.Zero(t, spent, "no attempt is spent on a broker-wide refusal")
	time.Sleep(150 * time.Millisecond) // past the publish timeout, the refusal shows in health
	require.ErrorContains(t, relay.Health(), "refused publishes")

	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.MaxMsgs = -1 }) // an operator frees space
	require.Eventually(t, func() bool {
		_, err := relay.DispatchOnce(ctx)
		return err == nil && b.statusCounts(t)["dispatched"] == 21
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, uint64(21), b.streamMessages(t), "every row published once")
	require.NoError(t, relay.Health())
}

// 4. The consumer's database is slower than the ack wait (its inbox locked) for longer than
// ack wait × max deliver: no delivery counts against an event, and once the database is back
// every event is processed and none failed.
func TestADatabaseSlowerThanTheAckWaitFailsNoEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addEvents(t, 5)
	_, err := b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)

	lock, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, "LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "gl", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted,
			AckWait: 300 * time.Millisecond, MaxDeliver: 2},
		RetryDelay: 10 * time.Millisecond,
		Trust:      b.keys.Trust,
	}, b.topo, b.nc, b.pool, inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil }), b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	// Wait until every event has been delivered more than MaxDeliver times in vain.
	require.Eventually(t, func() bool { return c.Stats().Retried >= 3*int64(len(ids)) }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, lock.Rollback(ctx))

	// The inbox, not the consumer's counters, says what was applied: a commit that outran its
	// deadline as the lock went may have committed, and its redelivery then counts as a duplicate.
	inbox := func() map[string]int64 {
		counts, err := eventsdb.New(b.pool).InboxStatusCounts(ctx)
		if err != nil {
			return nil
		}
		byStatus := map[string]int64{}
		for _, row := range counts {
			byStatus[row.Status] = row.Count
		}
		return byStatus
	}
	require.Eventually(t, func() bool { return inbox()[contract.StatusProcessed] == int64(len(ids)) }, 60*time.Second, 20*time.Millisecond)
	stop()
	require.Zero(t, c.Stats().Failed)
	require.Equal(t, map[string]int64{contract.StatusProcessed: int64(len(ids))}, inbox(), "every event processed, none failed")
}
