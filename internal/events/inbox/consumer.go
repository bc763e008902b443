package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/internal/eventtrace"
	"walletgl/internal/events/internal/loop"
	"walletgl/internal/events/signing"
	"walletgl/internal/faults"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
)

// The consumer loop's settings when a ConsumerConfig leaves them zero; the delivery settings
// of its events.ConsumerSpec default as the topology's do (events.DefaultAckWait, …).
const (
	DefaultBatchSize       = 100 // also the relay's (outbox.DefaultBatchSize): EVENTS_BATCH_SIZE sets both
	DefaultConsumerWorkers = 2
	DefaultRetryDelay      = time.Second
)

// ConsumerConfig holds the consumer loop's settings; zero values take the defaults.
type ConsumerConfig struct {
	events.ConsumerSpec
	BatchSize  int               // messages fetched (and committed together) per round (DefaultBatchSize)
	Workers    int               // fetch-commit loops on the durable consumer at once
	RetryDelay time.Duration     // first delay before a failed event is delivered again
	Faults     *faults.Set       // arms the consumer's fault points (nil: none)
	Metrics    *metrics.Consumer // records what the consumer applies (nil: nothing)
	// Trust holds the keys every event is verified against, before anything else is done with it,
	// as signed by the producer of EventType (contract.Producer): required (signing.AcceptUnsigned
	// says so when events are not to be verified).
	Trust *signing.Trust
	// Tracing continues the trace a message's headers carry with a consume span and a span for
	// the transaction that applies it (nil: no spans; the trace context still reaches the
	// handler, which writes it on).
	Tracing *tracing.Provider
	// InboxRetention is how long the inbox keeps the row of an event it processed after it
	// last saw the event (DefaultRetention); see DeleteExpiredInbox.
	InboxRetention time.Duration
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	c.BatchSize = int(orDefault(int64(c.BatchSize), DefaultBatchSize))
	c.Workers = int(orDefault(int64(c.Workers), DefaultConsumerWorkers))
	c.RetryDelay = orDefault(c.RetryDelay, DefaultRetryDelay)
	c.AckWait = orDefault(c.AckWait, events.DefaultAckWait)
	c.MaxDeliver = int(orDefault(int64(c.MaxDeliver), events.DefaultMaxDeliver))
	c.MaxAckPending = int(orDefault(int64(c.MaxAckPending), events.DefaultMaxAckPending))
	c.InboxRetention = orDefault(c.InboxRetention, DefaultRetention)
	return c
}

// ConsumerStats counts what a consumer did since it started.
type ConsumerStats struct {
	Processed  int64 // events handled and committed
	Duplicates int64 // events the inbox had seen before, skipped
	Failed     int64 // events recorded as failed (poison or out of deliveries)
	Retried    int64 // deliveries rolled back and negatively acknowledged
	// Unauthenticated counts the failed events whose producer could not be verified.
	Unauthenticated int64
	Waited          int64 // events parked in the inbox to wait for another (acknowledged)
	Released        int64 // parked events applied once what they waited for posted
}

// Consumer is a durable JetStream pull consumer feeding a Handler through the inbox: each event
// is claimed, handled and marked processed in one transaction, then acknowledged to the broker.
type Consumer struct {
	cfg      ConsumerConfig
	topo     events.Topology
	nc       *nats.Conn
	js       jetstream.JetStream
	pool     *pgxpool.Pool
	inbox    *Inbox
	log      zerolog.Logger
	producer string         // the one service whose events it accepts (contract.Producer of EventType)
	batches  *loop.Watchdog // batches in flight, to report a loop that no longer ends one
	backlog  *backlogGate   // whether the extra loops have work
	failing  *failureCount  // deliveries whose handler ran and failed, per event
	tracing  eventtrace.Tracing
	waiters  *waiters     // keys whose waiting events are to be retried now
	waiting  atomic.Int64 // waiting events, as last counted (or since parked)

	processed       atomic.Int64
	duplicates      atomic.Int64
	failed          atomic.Int64
	retried         atomic.Int64
	unauthenticated atomic.Int64
	waited          atomic.Int64
	released        atomic.Int64
}

// NewConsumer returns a consumer of cfg's event type applying handler to pool's database.
func NewConsumer(cfg ConsumerConfig, topo events.Topology, nc *nats.Conn, pool *pgxpool.Pool, handler Handler, log zerolog.Logger) (*Consumer, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	cfg = cfg.withDefaults()
	producer := contract.Producer(cfg.EventType)
	switch {
	case cfg.Trust == nil:
		return nil, fmt.Errorf("consumer %s: no trusted keys to verify events with (signing.AcceptUnsigned to take them unverified)", cfg.Name)
	case producer == "":
		return nil, fmt.Errorf("consumer %s: no service produces %s", cfg.Name, cfg.EventType)
	case producer != cfg.Source:
		return nil, fmt.Errorf("consumer %s: %s comes from %s, not from %s's stream", cfg.Name, cfg.EventType, producer, cfg.Source)
	}
	for _, other := range append(slices.Clone(cfg.Accepts), cfg.Also...) {
		if contract.Producer(other) != producer {
			return nil, fmt.Errorf("consumer %s: %s does not come from %s as %s does", cfg.Name, other, producer, cfg.EventType)
		}
	}
	return &Consumer{
		cfg: cfg, topo: topo, nc: nc, js: js, pool: pool, inbox: New(cfg.Name, handler), producer: producer,
		log:     log.With().Str("component", "consumer").Str("consumer", cfg.Name).Logger(),
		batches: loop.NewWatchdog(loop.StallAfter(cfg.AckWait + bookkeepingTimeout)),
		backlog: newBacklogGate(),
		failing: newFailureCount(failureCountLimit),
		tracing: eventtrace.New(cfg.Tracing),
		waiters: newWaiters(),
	}, nil
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{
		Processed: c.processed.Load(), Duplicates: c.duplicates.Load(),
		Failed: c.failed.Load(), Retried: c.retried.Load(), Unauthenticated: c.unauthenticated.Load(),
		Waited: c.waited.Load(), Released: c.released.Load(),
	}
}

// Run consumes until ctx is cancelled, and deletes the inbox rows past their retention
// (DeleteExpiredInbox) every minute. A batch in progress is finished (committed and
// acknowledged) before Run returns; what was not yet fetched stays with the broker.
func (c *Consumer) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for i := range c.cfg.Workers {
		g.Go(func() error { return c.consume(ctx, i > 0) })
	}
	g.Go(func() error { return c.retentionLoop(ctx) })
	g.Go(func() error { c.retryWaiting(ctx, true); return nil })
	return g.Wait()
}

// Health reports a consumer loop wedged in a batch for far longer than its deadlines allow.
func (c *Consumer) Health() error {
	if age, stuck := c.batches.Stalled(time.Now()); stuck {
		return fmt.Errorf("consumer %s: a batch has been in flight for %s", c.cfg.Name, age.Round(time.Second))
	}
	return nil
}

// Unverified reports a consumer that accepts events unverified (EVENTS_INSECURE_UNSIGNED).
func (c *Consumer) Unverified() error {
	if c.cfg.Trust.Insecure() {
		return fmt.Errorf("consumer %s accepts events unverified", c.cfg.Name)
	}
	return nil
}

// UnauthenticatedWarnFor is how long after an event was recorded unauthenticated the consumer's
// Unauthenticated check keeps failing, unless an operator resolves it.
const UnauthenticatedWarnFor = 15 * time.Minute

// Unauthenticated reports events recorded failed as unauthenticated in the last
// UnauthenticatedWarnFor and not resolved: someone publishes on the producer's subject who is
// not the producer, or a producer signs with a key the consumer does not trust. It reads the
// inbox, so every instance of the service says the same and a restart forgets nothing. It is a
// warning, not a failure of the service: whoever can publish would otherwise decide the
// service's health.
func (c *Consumer) Unauthenticated(ctx context.Context) error {
	r, err := eventsdb.New(c.pool).RecentUnauthenticatedInbox(ctx, eventsdb.RecentUnauthenticatedInboxParams{
		Consumer: c.inbox.name, Since: time.Now().Add(-UnauthenticatedWarnFor),
	})
	if err != nil {
		return fmt.Errorf("consumer %s: count unauthenticated events: %w", c.cfg.Name, interpretError(err))
	}
	if r.Count == 0 {
		return nil
	}
	return fmt.Errorf("consumer %s: %d events recorded failed as unauthenticated in the last %s and not resolved, the last %s ago (inbox list --status failed)",
		c.cfg.Name, r.Count, UnauthenticatedWarnFor, max(time.Since(r.Newest), 0).Round(time.Second))
}

// consume is one fetch-commit-ack loop; Run runs Workers of them on the durable consumer.
// Events are independent, so while one loop waits for its commit another fetches and posts.
// An extra loop (every one but the first) takes part only while the consumer is behind
// (backlogGate), and then takes only what is waiting: it never waits for the next event.
func (c *Consumer) consume(ctx context.Context, extra bool) error {
	// acks holds the confirmed acks of this loop's last committed batch while it fetches and
	// commits the next one: one batch of acks in flight at most.
	acks := &acks{confirm: true}
	defer acks.wait()
	failures := 0
	var cons jetstream.Consumer
	var pull *standingPull // the first loop's (nil for an extra one, or until started)
	defer func() { pull.stop() }()
	lose := func() { // the broker may have lost the consumer: ensure it again
		cons = nil
		pull.stop()
		pull = nil
	}
	checked := time.Now()
	for ctx.Err() == nil {
		if cons == nil {
			var err error
			if cons, err = c.topo.EnsureConsumer(ctx, c.js, c.cfg.ConsumerSpec); err != nil {
				failures++
				c.logFailure(err, failures).Msg("ensure consumer")
				loop.Sleep(ctx, loop.Backoff(failures, 200*time.Millisecond, 5*time.Second))
				continue
			}
		}
		if !extra && pull == nil {
			var err error
			if pull, err = startStandingPull(cons, c.cfg.BatchSize); err != nil {
				failures++
				c.logFailure(err, failures).Msg("start pulling events")
				lose()
				loop.Sleep(ctx, loop.Backoff(failures, 200*time.Millisecond, 5*time.Second))
				continue
			}
		}
		if extra && !c.backlog.wait(ctx) {
			break
		}
		msgs, err := c.fetchAs(ctx, cons, pull)
		if err != nil {
			failures++
			c.logFailure(err, failures).Msg("fetch events")
			lose()
			loop.Sleep(ctx, loop.Backoff(failures, 200*time.Millisecond, 5*time.Second))
			continue
		}
		failures = 0
		c.backlog.set(fetchedBehind(msgs, c.cfg.BatchSize))
		if len(msgs) > 0 {
			// Finish the batch even if ctx is cancelled meanwhile.
			c.handleBatch(context.WithoutCancel(ctx), c.inspectAll(msgs, 1), acks)
			continue
		}
		if !extra && time.Since(checked) > consumerCheckInterval {
			checked = time.Now()
			if !c.consumerExists(ctx, cons) {
				lose()
			}
		}
	}
	return nil
}

// consumerCheckInterval is how often an idle consumer asks the broker whether its durable
// consumer still exists.
const consumerCheckInterval = 5 * time.Second

// consumerExists asks the broker about the durable consumer after idle fetches: an idle fetch
// cannot tell "nothing to do" from "the broker lost this consumer" (nats-server 2.9 just lets
// the pull expire). False means it is lost and must be created again.
func (c *Consumer) consumerExists(ctx context.Context, cons jetstream.Consumer) bool {
	info, err := cons.Info(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		c.log.Warn().Err(err).Msg("consumer lost by the broker; creating it again")
		return false
	}
	c.cfg.Metrics.Pending(info.NumPending)
	return true
}

func (c *Consumer) logFailure(err error, failures int) *zerolog.Event {
	ev := c.log.Debug()
	if failures == 1 || failures%50 == 0 {
		ev = c.log.Warn()
	}
	return ev.Err(err).Int("failures", failures)
}

// fetchAs fetches the next batch for a loop: the first loop takes it from its standing pull,
// waiting up to a second for the first event; an extra one (pull nil) takes only what is
// waiting at the broker.
func (c *Consumer) fetchAs(ctx context.Context, cons jetstream.Consumer, pull *standingPull) ([]jetstream.Msg, error) {
	if pull == nil {
		return collect(cons.FetchNoWait(c.cfg.BatchSize))
	}
	return pull.next(ctx, c.cfg.BatchSize, time.Second)
}

// fetch returns the next batch for a replay: whatever is waiting right now (up to the batch
// size), or else the first message to arrive within a second followed by whatever came with it.
// Every pull request is complete when fetch returns, so no message is left parked in a request
// nobody reads, and nothing is buffered ahead to outlive its ack wait.
func (c *Consumer) fetch(cons jetstream.Consumer, size int) ([]jetstream.Msg, error) {
	msgs, err := collect(cons.FetchNoWait(size))
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	msgs, err = collect(cons.Fetch(1, jetstream.FetchMaxWait(time.Second)))
	if err != nil || len(msgs) == 0 {
		return msgs, err
	}
	if size > 1 && pendingAfter(msgs) {
		if rest, err := collect(cons.FetchNoWait(size - 1)); err == nil {
			msgs = append(msgs, rest...)
		}
	}
	return msgs, nil
}

func collect(batch jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	err = batch.Error()
	if err == nil || len(msgs) > 0 || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) ||
		errors.Is(err, context.DeadlineExceeded) {
		return msgs, nil // handle what arrived; a real error shows again on the next fetch
	}
	return nil, fmt.Errorf("fetch: %w", err)
}

// delivery is one fetched message with what the loop needs to know about it.
type delivery struct {
	Inbound
	msg       jetstream.Msg
	delivered uint64
	err       error // why the envelope is unusable
	// span is the consume span when the message carries a trace context (nil otherwise), and
	// traceID its trace id for the log.
	span    trace.Span
	traceID string
}

// inspect reads a fetched message whose signature was verified already (verified: nil, or
// why its producer could not be verified): nothing of it is believed before that, then its
// envelope is decoded and its type checked.
func (c *Consumer) inspect(msg jetstream.Msg, verified error) delivery {
	d := delivery{msg: msg}
	if meta, err := msg.Metadata(); err == nil {
		d.StreamSeq, d.delivered = meta.Sequence.Stream, meta.NumDelivered
		c.cfg.Metrics.Pending(meta.NumPending) // what was still waiting when the message left the broker
	}
	if verified != nil {
		return unauthenticated(d, verified)
	}
	d.Env, d.err = contract.DecodeEnvelope(msg.Data())
	d.EventID = d.Env.ID
	if d.EventID == "" {
		d.EventID = msg.Headers().Get(jetstream.MsgIDHeader)
	}
	if d.EventID == "" {
		d.EventID = "seq-" + strconv.FormatUint(d.StreamSeq, 10)
	}
	if d.err == nil {
		d.err = c.expectType(d.Env)
	}
	return c.startConsume(d) // only a verified message's trace context is believed
}

// inspectAll verifies and inspects msgs in order, split among up to parallel goroutines:
// verifying signatures is most of a replay's work outside the database. Each part's
// signatures are verified as one batch (signing.Trust.VerifyAll).
func (c *Consumer) inspectAll(msgs []jetstream.Msg, parallel int) []delivery {
	ds := make([]delivery, len(msgs))
	parallel = min(max(parallel, 1), len(msgs))
	inspectPart := func(from, to int) {
		signed := make([]signing.Signed, to-from)
		for i, msg := range msgs[from:to] {
			signed[i] = signing.Signed{Body: msg.Data(), Header: msg.Headers()}
		}
		for i, verified := range c.cfg.Trust.VerifyAll(c.producer, signed) {
			ds[from+i] = c.inspect(msgs[from+i], verified)
		}
	}
	if parallel <= 1 {
		inspectPart(0, len(msgs))
		return ds
	}
	var wg sync.WaitGroup
	per := (len(msgs) + parallel - 1) / parallel
	for from := 0; from < len(msgs); from += per {
		to := min(from+per, len(msgs))
		wg.Go(func() { inspectPart(from, to) })
	}
	wg.Wait()
	return ds
}

// unauthenticated is the delivery of a message whose producer could not be verified. Its inbox
// row is not the event id it claims but one of its own, made from its bytes and signature
// headers: a forgery must never take the inbox row of the real event it names, which would
// then be skipped as a duplicate (or a real event's row be overwritten by it). Each forged
// message has its row; a redelivery of one is the same row. The claimed id and type are only
// shown.
func unauthenticated(d delivery, cause error) delivery {
	var claimed contract.Envelope
	_ = json.Unmarshal(d.msg.Data(), &claimed) // for the record only: nothing of it is believed
	h := sha256.New()
	for _, part := range []string{string(d.msg.Data()), d.msg.Headers().Get(signing.HeaderKeyID), d.msg.Headers().Get(signing.HeaderSignature)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	d.EventID = "unauthenticated-" + hex.EncodeToString(h.Sum(nil)[:16])
	d.Env = contract.Envelope{Type: claimed.Type}
	if claimed.ID != "" {
		cause = fmt.Errorf("%w (it claims to be event %q)", cause, claimed.ID)
	}
	d.err = cause
	return d
}

// The replay's settings when ReplayOptions leaves them zero: one acknowledgment event per
// transaction, and three transactions in flight while the next batch is fetched and verified
// (on two cores, 11.2k events/s against 10.1k with two and 10.8k with four: BenchmarkReplay).
const (
	DefaultReplayBatchSize   = contract.MaxPostingsPerEvent
	DefaultReplayConcurrency = 3
)

// ReplayOptions are the settings of Consumer.Replay; zero values take the defaults.
type ReplayOptions struct {
	BatchSize   int // events fetched, verified and committed together (DefaultReplayBatchSize)
	Concurrency int // batch transactions in flight at once (DefaultReplayConcurrency)
}

func (o ReplayOptions) withDefaults() ReplayOptions {
	o.BatchSize = int(orDefault(int64(o.BatchSize), DefaultReplayBatchSize))
	o.Concurrency = int(orDefault(int64(o.Concurrency), DefaultReplayConcurrency))
	return o
}

// Replay applies every event still in the stream of the consumer's durable consumer, from the
// first, through the same verification, inbox and handler as the live loop, but through a broker
// consumer of its own (events.Topology.CreateReplayConsumer): gl replay rebuilds a ledger with it.
// It returns once nothing is pending or waiting for an ack (an event that waits for another is
// parked in the inbox, status waiting, and acknowledged: ListInbox names those still waiting at the
// end); progress hears the events done and the total known so far (events published meanwhile join
// the replay).
//
// It is the live loop pipelined: while Concurrency batch transactions commit, the next batch
// is fetched and its signatures verified on every core. Batches may commit out of stream order:
// each event's inbox claim is what makes it applied once, a copy in a batch committing at the
// same time waits for the first claim and is skipped as a duplicate. Acknowledgments to the
// broker are not awaited: they only serve the replay's end and a lost one brings a redelivery
// the inbox skips. A cancelled replay stops fetching, finishes the transactions in flight and
// returns: every batch is committed whole or not at all.
func (c *Consumer) Replay(ctx context.Context, opts ReplayOptions, progress func(done, total uint64)) error {
	opts = opts.withDefaults()
	spec := c.cfg.ConsumerSpec
	// Fetched and not yet acknowledged: the batches committing, those queued, the one fetched.
	spec.MaxAckPending = max(spec.MaxAckPending, opts.BatchSize*(2*opts.Concurrency+2))
	cons, err := c.topo.CreateReplayConsumer(ctx, c.js, spec)
	if err != nil {
		return err
	}
	defer c.deleteReplayConsumer(ctx, cons.CachedInfo().Name)
	total := cons.CachedInfo().NumPending

	// Events that wait for another are parked and acknowledged, so the replay ends; those whose
	// original commits meanwhile are applied at once, and the rest get one more try at the end.
	waitCtx, stopWaiting := context.WithCancel(context.WithoutCancel(ctx))
	var waitLoop sync.WaitGroup
	waitLoop.Go(func() { c.retryWaiting(waitCtx, false) })
	defer func() { stopWaiting(); waitLoop.Wait() }()

	batches := make(chan []delivery, opts.Concurrency)
	var inFlight atomic.Int64     // events fetched and not yet done with
	var unfinished sync.WaitGroup // batches fetched and not yet done with
	var workers sync.WaitGroup
	acks := &acks{}
	for range opts.Concurrency {
		workers.Go(func() {
			for ds := range batches {
				if ctx.Err() == nil { // cancelled: leave the rest unapplied, the broker forgets it
					c.handleBatch(context.WithoutCancel(ctx), ds, acks)
				}
				inFlight.Add(-int64(len(ds)))
				unfinished.Done()
			}
		})
	}
	defer workers.Wait()
	defer close(batches)

	// The total is an estimate while the replay runs: a message redelivered (its ack late or
	// lost) is pending again and counted twice. Once the broker says nothing is left, the
	// total is what was done.
	report := func(pending uint64, finished bool) {
		s := c.Stats()
		done := uint64(s.Processed + s.Duplicates + s.Failed + s.Waited)
		total = max(total, done+uint64(inFlight.Load())+pending)
		if finished {
			total = done
		}
		progress(done, total)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		msgs, err := c.fetch(cons, opts.BatchSize)
		if err != nil {
			return err
		}
		// What was still waiting when the batch's last message left the broker: nothing after
		// an empty fetch, something when its metadata cannot tell.
		pending := uint64(0)
		if len(msgs) > 0 {
			pending = 1
			if meta, err := msgs[len(msgs)-1].Metadata(); err == nil {
				pending = meta.NumPending
			}
			ds := c.inspectAll(msgs, runtime.GOMAXPROCS(0))
			inFlight.Add(int64(len(ds)))
			unfinished.Add(1)
			select {
			case batches <- ds:
			case <-ctx.Done():
				inFlight.Add(-int64(len(ds)))
				unfinished.Done()
				return ctx.Err()
			}
		}
		report(pending, false)
		if pending > 0 {
			continue
		}
		// Perhaps the end: once everything fetched is done, the broker tells.
		unfinished.Wait()
		finished, err := c.replayFinished(ctx, cons)
		if err != nil {
			return err
		}
		report(0, finished)
		if finished {
			stopWaiting()
			waitLoop.Wait()
			c.applyWaiting(ctx, nil)
			return ctx.Err()
		}
	}
}

// replayFinished reports whether the replay consumer has nothing left: nothing pending and no
// message waiting for an ack. The acks just sent are flushed first; the broker may take a
// moment to count them, so it is asked again a few times before a message still waiting for
// its ack is taken for one to be redelivered (a nak, a lost ack), which the next fetch gets.
func (c *Consumer) replayFinished(ctx context.Context, cons jetstream.Consumer) (bool, error) {
	if err := c.nc.FlushTimeout(bookkeepingTimeout); err != nil {
		return false, fmt.Errorf("replay: flush acks: %w", err)
	}
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, fmt.Errorf("replay consumer state: %w", err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return true, nil
		}
		if info.NumPending > 0 || wait > 500*time.Millisecond {
			return false, nil
		}
		loop.Sleep(ctx, wait)
	}
}

func (c *Consumer) deleteReplayConsumer(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.js.DeleteConsumer(ctx, c.topo.StreamName(c.cfg.Source), name); err != nil {
		c.log.Debug().Err(err).Str("consumer", name).Msg("delete replay consumer; the broker drops it after a minute")
	}
}

// handleBatch processes inspected messages. Poison messages are dead-lettered one by one; the
// rest are tried in one transaction, and if that fails for a reason of its own events, one
// transaction each, so one bad event fails alone and the others still commit. A database that
// is slow or away fails the whole batch back to the broker instead: trying each event alone
// would only wait out the same deadline again for every one of them.
func (c *Consumer) handleBatch(ctx context.Context, ds []delivery, acks *acks) {
	defer c.batches.Begin()()
	started := time.Now()
	defer func() { c.cfg.Metrics.Batch(time.Since(started)) }()
	var good []delivery
	for _, d := range ds {
		if d.err != nil {
			c.deadLetter(ctx, d, contract.FailureReason(d.err), d.err)
			continue
		}
		good = append(good, d)
	}
	if len(good) > 1 {
		fresh, err := c.processTx(ctx, good)
		if err == nil {
			c.committed(ctx, good, fresh, acks)
			return
		}
		if database.IsTransient(err) {
			c.retryAll(ctx, good, err)
			return
		}
		c.log.Debug().Err(err).Int("events", len(good)).Msg("batch rolled back; handling its events one by one")
	}
	for i, d := range good {
		fresh, err := c.processTx(ctx, []delivery{d})
		if err != nil && database.IsTransient(err) {
			c.retryAll(ctx, good[i:], err)
			return
		}
		if err != nil {
			c.handleFailure(ctx, d, err)
			continue
		}
		c.committed(ctx, []delivery{d}, fresh, acks)
	}
}

// committed follows a commit: the fault point, then the acknowledgment to the broker.
func (c *Consumer) committed(ctx context.Context, ds []delivery, fresh []bool, acks *acks) {
	for _, d := range ds {
		c.failing.forget(d.EventID)
	}
	c.satisfied(ds, fresh)
	_ = c.cfg.Faults.Hit(c.cfg.Name + faults.ConsumerAfterCommit)
	c.acknowledge(ctx, ds, fresh, acks)
}

// processTx applies the deliveries through the inbox in one transaction, which must commit
// within the ack wait (after it, the broker delivers the events again). Workers posting to the
// same hot accounts can deadlock each other: such a transaction is run again at once, within
// the same deadline, rather than the whole batch handed back to the broker as transient.
func (c *Consumer) processTx(ctx context.Context, ds []delivery) (fresh []bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AckWait)
	defer cancel()
	events := make([]Inbound, len(ds))
	for i, d := range ds {
		events[i] = d.Inbound
	}
	spans := c.startApply(ds, events)
	defer func() { endApply(spans, err) }()
	return database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() ([]bool, error) {
		return database.WithTxV(ctx, c.pool, func(tx pgx.Tx) ([]bool, error) {
			fresh, err := c.inbox.Apply(ctx, tx, events)
			if err != nil {
				return nil, err
			}
			return fresh, c.cfg.Faults.Hit(c.cfg.Name + faults.ConsumerBeforeCommit)
		})
	})
}

// acks is how a loop acknowledges its committed deliveries to the broker.
//
// Confirmed (the live loop): a batch's acks are sent while the loop goes on to the next batch,
// the acks of one batch in flight at most, and confirmed once per batch (confirmAcks).
// Otherwise (a replay): plain acks, awaited by nobody; they only tell the replay's own consumer
// how far it got.
//
// Either way the commit is what counts, and a lost ack only brings a redelivery that the inbox
// recognises as a duplicate.
type acks struct {
	confirm bool
	sending sync.WaitGroup
}

func (a *acks) wait() { a.sending.Wait() }

// acknowledge counts committed deliveries and acknowledges them as acks says.
func (c *Consumer) acknowledge(ctx context.Context, ds []delivery, fresh []bool, acks *acks) {
	n, dups := 0, 0
	byType := map[string]int{} // fresh events per type: a consumer may take several
	for i, d := range ds {
		if fresh[i] {
			n++
			byType[d.Env.Type]++
		} else {
			dups++
			tracing.LogTraceID(c.log.Debug(), d.traceID).Str("event_id", d.EventID).Uint64("delivered", d.delivered).Msg("duplicate event skipped")
		}
	}
	c.processed.Add(int64(n))
	c.duplicates.Add(int64(dups))
	for eventType, fresh := range byType {
		c.cfg.Metrics.Processed(eventType, fresh, 0)
	}
	c.cfg.Metrics.Processed(c.cfg.EventType, 0, dups)
	if !acks.confirm {
		c.sendAcks(ds)
		endConsumes(ds, fresh)
		return
	}
	acks.sending.Wait()
	acks.sending.Add(1)
	go func() {
		defer acks.sending.Done()
		c.confirmAcks(ctx, ds, fresh)
	}()
}

// confirmAcks acknowledges committed deliveries with plain acks and a double ack of the last
// one: the connection carries them in order, so its confirmation comes back after the broker
// has received the others. That is one round trip per batch where a double ack of each event
// cost the broker and this process at least twice the CPU per event of a plain ack
// (docs/decisions/0012-consumer-loops-standing-pull-and-batch-acks.md). Committed already, an
// ack that is lost only brings a redelivery, which the inbox recognises as a duplicate.
func (c *Consumer) confirmAcks(ctx context.Context, ds []delivery, fresh []bool) {
	if len(ds) == 0 {
		return
	}
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AckWait)
	defer cancel()
	last := len(ds) - 1
	c.sendAcks(ds[:last])
	if err := ds[last].msg.DoubleAck(ackCtx); err != nil {
		tracing.LogTraceID(c.log.Debug(), ds[last].traceID).Err(err).Str("event_id", ds[last].EventID).
			Int("events", len(ds)).Msg("acks not confirmed")
	}
	endConsumes(ds, fresh)
}

// sendAcks sends a plain ack of each delivery; nothing waits for the broker's answer.
func (c *Consumer) sendAcks(ds []delivery) {
	for _, d := range ds {
		if err := d.msg.Ack(); err != nil {
			tracing.LogTraceID(c.log.Debug(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("ack not sent")
		}
	}
}

// endConsumes ends the consume spans of acknowledged deliveries with their outcomes.
func endConsumes(ds []delivery, fresh []bool) {
	for i, d := range ds {
		endConsume(d, outcomeOf(fresh[i]), nil)
	}
}

// bookkeepingTimeout bounds the writes that record what became of a delivery. They run on a
// context of their own: the batch's deadline may have passed already, and recording a failure
// with it would fail too.
const bookkeepingTimeout = 10 * time.Second

// handleFailure decides what a failed delivery becomes. A permanent cause (an event that can never
// be applied, or one that contradicts what was applied) is recorded failed at once. A handler that
// ran and failed counts toward MaxDeliver, after which the event is recorded failed as exhausted;
// one that waits for another event (contract.ErrNotYet) is parked (park). Anything else is
// delivered again after a growing delay, for as long as it takes: a database that is slow or away
// never makes an event fail.
func (c *Consumer) handleFailure(ctx context.Context, d delivery, err error) {
	if errors.Is(err, contract.ErrMalformed) || errors.Is(err, contract.ErrConflict) {
		c.deadLetter(ctx, d, contract.FailureReason(err), err)
		return
	}
	if errors.Is(err, contract.ErrNotYet) {
		c.park(ctx, d, err)
		return
	}
	if n := c.failing.add(d.EventID); n >= c.cfg.MaxDeliver {
		c.deadLetter(ctx, d, contract.ReasonExhausted, fmt.Errorf("handler failed on %d deliveries: %w", n, err))
		return
	}
	c.retry(d, err)
}

// retryAll returns deliveries to the broker for a later delivery without counting them against
// the event: the database was slow or away.
func (c *Consumer) retryAll(ctx context.Context, ds []delivery, err error) {
	c.log.Warn().Err(err).Int("events", len(ds)).Msg("database slow or unavailable; the events will be delivered again")
	for _, d := range ds {
		c.retry(d, nil)
	}
}

// retry has the broker deliver d again after a growing delay.
func (c *Consumer) retry(d delivery, err error) {
	c.retried.Add(1)
	delay := loop.Backoff(int(d.delivered), c.cfg.RetryDelay, time.Minute)
	if err != nil {
		tracing.LogTraceID(c.log.Warn(), d.traceID).Err(err).Str("event_id", d.EventID).Uint64("delivered", d.delivered).Int64("retry_in_ms", delay.Milliseconds()).Msg("event failed; will be delivered again")
	}
	if err := d.msg.NakWithDelay(delay); err != nil {
		tracing.LogTraceID(c.log.Debug(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("nak not sent; the ack wait will redeliver")
	}
	endConsume(d, "redelivered", err)
}

// deadLetter records the event as failed in the inbox, with its reason, the cause and the raw
// payload, and terminates it at the broker so it is not delivered again. If the record cannot
// be written (database down), the message is left to be redelivered: nothing is dropped
// unrecorded.
func (c *Consumer) deadLetter(ctx context.Context, d delivery, reason string, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	f := Failure{Reason: reason, Cause: cause, Payload: d.msg.Data(), Attempts: int32(d.delivered)}
	if err := c.inbox.RecordFailure(ctx, c.pool, d.Inbound, f); err != nil {
		tracing.LogTraceID(c.log.Error(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("record failed event; leaving it for redelivery")
		c.retry(d, nil)
		return
	}
	c.failing.forget(d.EventID)
	c.failed.Add(1)
	c.cfg.Metrics.Failed(reason)
	if reason == contract.ReasonUnauthenticated {
		c.unauthenticated.Add(1)
	}
	tracing.LogTraceID(c.log.Error(), d.traceID).Err(cause).Str("reason", reason).Str("event_id", d.EventID).Uint64("stream_seq", d.StreamSeq).Msg("event dead-lettered in the inbox")
	if err := d.msg.Term(); err != nil {
		tracing.LogTraceID(c.log.Debug(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("term not sent")
	}
	endConsume(d, "failed", cause)
}

// failureCountLimit bounds how many failing events a consumer keeps count of; past it, one
// count is forgotten, which only gives that event more deliveries.
const failureCountLimit = 10000

// failureCount counts, per event, the deliveries whose handler ran and failed. It lives in the
// process: a restart forgets it, and several consumers each count their own, which can only
// give an event more deliveries before it is recorded failed, never fewer.
type failureCount struct {
	mu    sync.Mutex
	limit int
	n     map[string]int
}

func newFailureCount(limit int) *failureCount {
	return &failureCount{limit: limit, n: map[string]int{}}
}

func (f *failureCount) add(eventID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.n[eventID]; !ok && len(f.n) >= f.limit {
		for id := range f.n {
			delete(f.n, id)
			break
		}
	}
	f.n[eventID]++
	return f.n[eventID]
}

func (f *failureCount) forget(eventID string) {
	f.mu.Lock()
	delete(f.n, eventID)
	f.mu.Unlock()
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
