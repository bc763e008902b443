package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
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

var statuses = []string{"pending", "dispatching", "dispatched", "acknowledged", "failed", "dead_letter"}

var legal = map[[2]string]bool{
	{"pending", "dispatching"}: true, {"pending", "acknowledged"}: true,
	{"dispatching", "dispatched"}: true, {"dispatching", "failed"}: true, {"dispatching", "dead_letter"}: true,
	{"dispatching", "pending"}: true, {"dispatching", "acknowledged"}: true,
	{"dispatched", "dispatching"}: true, {"dispatched", "acknowledged"}: true,
	{"failed", "dispatching"}: true, {"failed", "dead_letter"}: true, {"failed", "pending"}: true, {"failed", "acknowledged"}: true,
	{"dead_letter", "pending"}: true, {"dead_letter", "acknowledged"}: true,
}

func TestOutboxStatusMovesOnlyAlongTheLifecycle(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	for _, from := range statuses {
		for _, to := range statuses {
			if from == to && from != "acknowledged" {
				continue // renewing a lease or re-arming catch-up keeps the status
			}
			id := uuid.New()
			_, err := pool.Exec(ctx, `
				INSERT INTO outbox (id, event_type, aggregate_id, payload, status, lease_owner, lease_until, acknowledged_at)
				VALUES ($1, 'TransferCompleted.v1', 'x', '{}', $2, 'relay', now(), now())`, id, from)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `
				UPDATE outbox SET status = $2,
				       lease_owner = CASE WHEN $2 = 'dispatching' THEN 'relay' END,
				       lease_until = CASE WHEN $2 = 'dispatching' THEN now() END
				WHERE id = $1`, id, to)
			if legal[[2]string{from, to}] {
				require.NoError(t, err, "%s -> %s is allowed", from, to)
			} else {
				require.Error(t, err, "%s -> %s is refused", from, to)
				require.Contains(t, err.Error(), "illegal status transition")
			}
		}
	}
}

func TestADeadRelaysRowsAreTakenOverWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addEvents(t, 40)
	ctx := context.Background()
	// A relay claims the rows and dies before publishing them: nothing releases its claim.
	claimed, err := eventsdb.New(b.pool).ClaimOutbox(ctx, eventsdb.ClaimOutboxParams{
		Owner: "dead-relay", LeaseSeconds: 0.5, MaxAttempts: 10, BatchSize: 100,
	})
	require.NoError(t, err)
	require.Len(t, claimed, 40)

	b.takeOverAfterLease(t, 40)
}

// takeOverAfterLease checks that another relay leaves n rows leased by a dead owner alone, then
// publishes each of them once after their lease (under 600 ms) ran out.
func (b *testBundle) takeOverAfterLease(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	survivor := b.relay(t, outbox.RelayConfig{})
	claimed, err := survivor.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, claimed, "leased rows are not published by another relay")

	time.Sleep(600 * time.Millisecond)
	claimed, err = survivor.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, n, claimed)
	require.Equal(t, map[string]int64{"dispatched": int64(n)}, b.statusCounts(t))
	require.Equal(t, uint64(n), b.streamMessages(t))
	require.Zero(t, survivor.Stats().Duplicates)
}

func TestBrokerDownKeepsRowsPendingWithoutBurningAttempts(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	broker := envtest.StartBroker(t)
	b := setupWithNATS(t, pool, broker.URL())
	b.addEvents(t, 30)
	relay := b.relay(t, outbox.RelayConfig{})
	ctx := context.Background()

	broker.Shutdown()
	require.Eventually(t, func() bool { return events.Healthy(b.nc) != nil }, 5*time.Second, 10*time.Millisecond)
	for range 5 {
		_, err := relay.DispatchOnce(ctx)
		require.Error(t, err)
	}
	b.addEvents(t, 20) // transfers keep committing while the broker is away

	var maxAttempts int32
	require.NoError(t, pool.QueryRow(ctx, "SELECT max(attempts) FROM outbox").Scan(&maxAttempts))
	require.Zero(t, maxAttempts, "an unreachable broker is not the rows' failure")
	require.Equal(t, map[string]int64{"pending": 50}, b.statusCounts(t))

	broker.Restart()
	require.Eventually(t, func() bool { return events.Healthy(b.nc) == nil }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, _ = relay.DispatchOnce(ctx)
		return b.statusCounts(t)["dispatched"] == 50
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, pool.QueryRow(ctx, "SELECT max(attempts) FROM outbox").Scan(&maxAttempts))
	require.Equal(t, int32(1), maxAttempts)
}

func TestCatchUpRepublishesWhatTheBrokerLostOnceItsDuplicateWindowHasPassed(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	broker := envtest.StartBroker(t)
	b := setupWithNATS(t, pool, broker.URL())
	b.topo.DuplicateWindow = time.Second // lower than the stream's: set on the stream as an operator would
	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.Duplicates = time.Second })
	ctx := context.Background()
	b.addEvents(t, 20)
	relay := b.relay(t, outbox.RelayConfig{AckTimeout: time.Millisecond, CatchUpLimit: 200})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	// The broker acknowledged the messages and then lost them.
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	require.NoError(t, stream.Purge(ctx))

	var handled atomic.Int64
	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		handled.Add(1)
		return nil
	}))
	stop := runInBackground(t, cons.Run)
	defer stop()

	// Inside the duplicate window a re-publish would be dropped as a duplicate of the message
	// the broker lost: catch-up leaves the rows for later.
	time.Sleep(5 * time.Millisecond)
	n, err := relay.CatchUpOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, relay.Stats().Duplicates)

	// Past it, catch-up publishes them again, and the consumer applies each once.
	time.Sleep(1100 * time.Millisecond)
	n, err = relay.CatchUpOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.Eventually(t, func() bool { return handled.Load() == 20 }, 10*time.Second, 20*time.Millisecond)

	// The acknowledgment never arrives (no wallet consumer here), but the stream holds the
	// copies: however often catch-up looks, it stores no third.
	time.Sleep(1100 * time.Millisecond)
	n, err = relay.CatchUpOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, uint64(20), b.streamMessages(t))
	require.Equal(t, int64(20), handled.Load(), "each event was handled exactly once")
}

func TestCatchUpRepublishesAtOnceIntoAStreamMadeAfterTheBrokerLostItsStore(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	broker := envtest.StartBroker(t)
	b := setupWithNATS(t, pool, broker.URL()) // the default two-minute duplicate window
	ctx := context.Background()
	b.addEvents(t, 20)
	relay := b.relay(t, outbox.RelayConfig{AckTimeout: time.Millisecond, CatchUpLimit: 200})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	// The broker lost its store a moment after it stored the messages: the stream made anew
	// never saw their ids, so catch-up publishes them again without waiting for the window.
	broker.Wipe()
	require.Eventually(t, func() bool { return events.Healthy(b.nc) == nil }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, b.topo.EnsureStreams(ctx, b.js))
	time.Sleep(5 * time.Millisecond)
	n, err := relay.CatchUpOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.Zero(t, relay.Stats().Duplicates)
	require.Equal(t, uint64(20), b.streamMessages(t))
}

func TestPoisonEventsAreDeadLetteredWithoutHoldingBackTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)

	b.publish(t, contract.SourceWallet, subject, []byte("{not json"), "garbage-1")
	invalid := envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "t-bad", FromWalletID: "a", ToWalletID: "b", Amount: 0, Currency: "USD", CreatedAt: time.Now()})
	invalidID := uuid.New()
	b.publish(t, contract.SourceWallet, subject, invalid, invalidID.String())
	b.addEvents(t, 1000)
	relay := b.relay(t, outbox.RelayConfig{BatchSize: 250})
	for {
		n, err := relay.DispatchOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}

	var handled atomic.Int64
	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		var data contract.TransferCompleted
		if err := env.DecodeData(&data); err != nil {
			return err
		}
		if err := data.Validate(); err != nil {
			return err
		}
		handled.Add(1)
		return nil
	}))
	stop := runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return handled.Load() == 1000 && cons.Stats().Failed == 2 }, 60*time.Second, 50*time.Millisecond)
	stop()

	failed, err := eventsdb.New(b.pool).ListInbox(ctx, eventsdb.ListInboxParams{Status: "failed", RowLimit: 10})
	require.NoError(t, err)
	require.Len(t, failed, 2)
	reasons := map[string]string{}
	for _, f := range failed {
		require.Equal(t, contract.ReasonMalformed, *f.Reason)
		reasons[f.EventID] = *f.Detail
		require.NotEmpty(t, f.Payload, "the raw payload is kept")
	}
	require.Contains(t, reasons["garbage-1"], "decode envelope")
	require.Contains(t, reasons[envelopeID(t, invalid)], "amount 0 is not positive")
}

// A handler that runs and fails is retried, and after MaxDeliver such deliveries the event is
// recorded failed as exhausted.
func TestAFailingHandlerIsRetriedAndThenRecordedExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.addEvents(t, 3)
	relay := b.relay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(context.Background())
	require.NoError(t, err)

	var calls atomic.Int64
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "gl", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted, MaxDeliver: 3},
		RetryDelay:   10 * time.Millisecond,
		Trust:        b.keys.Trust,
	}, b.topo, b.nc, b.pool, inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		if env.ID == ids[1].String() {
			calls.Add(1)
			return errors.New("account 9999 is not in the chart of accounts")
		}
		return nil
	}), b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Failed == 1 && c.Stats().Processed == 2 }, 30*time.Second, 20*time.Millisecond)
	stop()
	row, err := eventsdb.New(b.pool).GetInbox(context.Background(), "gl:"+ids[1].String())
	require.NoError(t, err)
	require.Equal(t, "failed", row.Status)
	require.Equal(t, int32(3), row.Attempts, "delivered MaxDeliver times")
	require.GreaterOrEqual(t, calls.Load(), int64(3))
	require.Equal(t, contract.ReasonExhausted, *row.Reason)
	require.Contains(t, *row.Detail, "handler failed on 3 deliveries")
}

func TestARefusedRowIsDeadLetteredAtMaxAttemptsAndRequeuedByAnOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.topo.MaxMsgSize = 2048 // the configured limit, below what the row needs
	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 2048 })
	id := uuid.Must(uuid.NewV7())
	big := strings.Repeat("x", 4096)
	_, err := outbox.New(contract.SourceWallet).Add(ctx, b.pool, outbox.Event{
		ID: id, Type: contract.TypeTransferCompleted, AggregateID: "t-big", Time: time.Now(),
		Data: map[string]string{"padding": big},
	})
	require.NoError(t, err)

	relay := b.relay(t, outbox.RelayConfig{MaxAttempts: 2})
	q := eventsdb.New(b.pool)
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := relay.DispatchOnce(ctx)
		require.NoError(t, err)
		row, err := q.GetOutbox(ctx, id)
		require.NoError(t, err)
		require.Equal(t, int32(attempt), row.Attempts)
		require.Contains(t, *row.LastError, "maximum")
		if attempt == 1 {
			require.Equal(t, "failed", row.Status)
			require.True(t, row.NextAttemptAt.After(time.Now()), "a backoff is set")
			_, err = b.pool.Exec(ctx, "UPDATE outbox SET next_attempt_at = now() WHERE id = $1", id)
			require.NoError(t, err)
		} else {
			require.Equal(t, "dead_letter", row.Status)
		}
	}
	n, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "dead letters are not retried on their own")

	// The operator raises the limit on the running stream and requeues the row.
	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.MaxMsgSize = -1 })
	requeued, err := q.RequeueOutbox(ctx, []uuid.UUID{id})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{id}, requeued)
	n, err = relay.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	row, err := q.GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "dispatched", row.Status)
	require.Equal(t, uint64(1), b.streamMessages(t), "published once")
}

// editStream changes the configuration of source's stream as an operator would, with the
// JetStream API.
func (b *testBundle) editStream(t *testing.T, source string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx := context.Background()
	stream, err := b.js.Stream(ctx, b.topo.StreamName(source))
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	edit(&cfg)
	_, err = b.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
}

func TestRetentionDeletesOnlyOldAcknowledgedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addEvents(t, 6)
	q := eventsdb.New(b.pool)
	// ids[0..1]: acknowledged long ago; ids[2]: acknowledged just now; ids[3]: dead letter, old;
	// ids[4..5]: pending, old.
	_, err := q.AcknowledgeOutbox(ctx, ids[:3])
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE outbox SET acknowledged_at = now() - interval '8 days' WHERE id = ANY($1)", ids[:2])
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE outbox SET status = 'dispatching', lease_owner = 'x', lease_until = now() WHERE id = $1", ids[3])
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE outbox SET status = 'dead_letter', lease_owner = NULL, lease_until = NULL WHERE id = $1", ids[3])
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE outbox SET created_at = now() - interval '30 days'")
	require.NoError(t, err)

	relay := b.relay(t, outbox.RelayConfig{Retention: 7 * 24 * time.Hour})
	require.NoError(t, relay.MaintainOnce(ctx))

	counts := b.statusCounts(t)
	require.Equal(t, map[string]int64{"acknowledged": 1, "dead_letter": 1, "pending": 2}, counts,
		"only the acknowledged rows past the retention are gone")
}

func envelopeBody(t *testing.T, id uuid.UUID, data any) []byte {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	body, err := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: id.String(), Source: "wallet",
		Type: contract.TypeTransferCompleted, Time: time.Now(), DataContentType: "application/json", Data: raw})
	require.NoError(t, err)
	return body
}

func envelopeID(t *testing.T, body []byte) string {
	t.Helper()
	env, err := contract.DecodeEnvelope(body)
	require.NoError(t, err)
	return env.ID
}

var _ = fmt.Sprint

// The broker never gives up on a message: deliveries that nobody applied (a process took them
// and died) do not count, and the event is processed once a consumer runs, however many
// deliveries went before. A broker that gave up would have moved its ack floor past an event
// nobody applied.
func TestTheBrokerNeverGivesUpOnAnEventNobodyApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addEvents(t, 1)
	relay := b.relay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	spec := events.ConsumerSpec{Name: "gl", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted,
		MaxDeliver: 1, AckWait: 300 * time.Millisecond}
	raw, err := b.topo.EnsureConsumer(ctx, b.js, spec)
	require.NoError(t, err)
	for range 3 { // three processes take the delivery and die without acknowledging it
		batch, err := raw.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for range batch.Messages() {
			n++
		}
		require.Equal(t, 1, n, "the event is delivered again")
	}

	c, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, Trust: b.keys.Trust}, b.topo, b.nc, b.pool,
		inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil }), b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Processed == 1 }, 15*time.Second, 20*time.Millisecond)
	stop()
	row, err := eventsdb.New(b.pool).GetInbox(ctx, "gl:"+ids[0].String())
	require.NoError(t, err)
	require.Equal(t, contract.StatusProcessed, row.Status)
	require.Zero(t, c.Stats().Failed)
}

// The seed system's first bug: its claim treated every error as "new". Here the claim fails for
// a reason other than a primary-key conflict (the inbox table is gone for a while): the event
// must not be handled, and must be handled exactly once when the claim works again.
func TestAClaimThatFailsForAnotherReasonIsRetriedNeverTreatedAsNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.addEvents(t, 5)
	relay := b.relay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	_, err = b.pool.Exec(ctx, "ALTER TABLE inbox RENAME TO inbox_away")
	require.NoError(t, err)
	var handled atomic.Int64
	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error {
		handled.Add(1)
		return nil
	}))
	stop := runInBackground(t, cons.Run)
	defer stop()
	require.Eventually(t, func() bool { return cons.Stats().Retried >= 5 }, 20*time.Second, 20*time.Millisecond)
	require.Zero(t, cons.Stats().Processed)

	_, err = b.pool.Exec(ctx, "ALTER TABLE inbox_away RENAME TO inbox")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cons.Stats().Processed == 5 }, 30*time.Second, 20*time.Millisecond)
	stop()
	require.Equal(t, int64(5), handled.Load(), "each event handled once, after the claim worked")
	require.Zero(t, cons.Stats().Duplicates)
}

// After the broker lost its store (streams and consumers gone), the consumer creates its
// durable consumer again and takes what the relay publishes on the recreated stream.
func TestTheConsumerComesBackAfterTheBrokerLostItsStore(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	broker := envtest.StartBroker(t)
	b := setupWithNATS(t, pool, broker.URL())
	ctx := context.Background()
	b.addEvents(t, 10)
	relay := b.relay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	var handled atomic.Int64
	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error {
		handled.Add(1)
		return nil
	}))
	stop := runInBackground(t, cons.Run)
	defer stop()
	require.Eventually(t, func() bool { return handled.Load() == 10 }, 20*time.Second, 20*time.Millisecond)

	broker.Wipe()
	require.Eventually(t, func() bool { return events.Healthy(b.nc) == nil }, 10*time.Second, 20*time.Millisecond)
	b.addEvents(t, 10)
	require.Eventually(t, func() bool {
		_, _ = relay.DispatchOnce(ctx) // the first round finds no stream and ensures it again
		return handled.Load() == 20
	}, 60*time.Second, 200*time.Millisecond)
}
