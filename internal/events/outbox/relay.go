package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/events"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/internal/eventtrace"
	"walletgl/internal/events/internal/loop"
	"walletgl/internal/events/signing"
	"walletgl/internal/faults"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
)

// The relay's settings when a RelayConfig leaves them zero (the seed's where it names one).
const (
	DefaultBatchSize      = 100 // also the consumer's
	DefaultRelayWorkers   = 2
	DefaultCatchUpLimit   = 200
	DefaultPollInterval   = 5 * time.Second
	DefaultAckTimeout     = 30 * time.Second
	DefaultMaxAttempts    = 10
	DefaultLease          = 30 * time.Second
	DefaultRetention      = 7 * 24 * time.Hour
	DefaultPublishTimeout = 5 * time.Second
)

// RelayConfig holds the relay's settings; zero values take the defaults above.
type RelayConfig struct {
	Source       string        // whose outbox and stream: contract.SourceWallet or contract.SourceGL
	Owner        string        // lease owner written on claimed rows; default host-pid-random
	BatchSize    int           // rows claimed per publish round
	Workers      int           // publish rounds in flight at once, for claims and hand-offs each
	CatchUpLimit int           // rows re-published per catch-up round
	PollInterval time.Duration // fallback poll and catch-up cadence
	AckTimeout   time.Duration // a dispatched row not acknowledged is checked this often: published again if its message left the stream
	MaxAttempts  int           // refusals of a message itself before its row is dead_letter
	Lease        time.Duration // how long a claim is held before another relay may take it
	Retention    time.Duration // acknowledged rows older than this are deleted
	// PublishTimeout bounds the wait for each PubAck of a round: a PubAck lost with a stream
	// leader ends as a timeout, and the round always ends.
	PublishTimeout time.Duration
	// AckConsumer, when set, is the durable consumer on this source's stream whose ack floor
	// acknowledges rows: the GL's TransferPosted.v2 rows are done once the wallet's consumer
	// acknowledged the very message stored for them (see AcknowledgeAppliedOnce). Empty: rows
	// are acknowledged by the consumer's reply event.
	AckConsumer string
	// Signer signs every message the relay publishes, over the exact bytes of the row's
	// envelope: it must be Source's key. Nil publishes unsigned, which only a consumer that
	// accepts unsigned events (EVENTS_INSECURE_UNSIGNED) applies.
	Signer *signing.Key
	// Faults arms the relay's fault points (nil: none).
	Faults *faults.Set
	// Metrics records what the relay publishes (nil: nothing).
	Metrics *metrics.Relay
	// Tracing continues the trace a row stores with a publish span (nil: no spans; a row's
	// trace context still goes into its message's headers).
	Tracing *tracing.Provider
	// MarkDelay, when set on a relay without an AckConsumer, holds the mark of each row it
	// published on commit (a hand-off) back this long: an acknowledgment applied through
	// Relay.Acknowledge meanwhile writes the publish's details in the update that acknowledges
	// the row, which is then written once instead of twice; rows still unacknowledged are
	// marked dispatched when it runs out (see heldMarks). Zero marks every publish at once. At
	// most half of Lease and of AckTimeout.
	MarkDelay time.Duration
	// PublishOnCommit: the service writes its rows claimed by this relay and hands them over as
	// their transaction commits (Outbox.PublishOnCommit); false, every row waits for a NOTIFY
	// and a claim. The relay takes hand-offs either way.
	PublishOnCommit bool
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	c.BatchSize = int(orDefault(int64(c.BatchSize), DefaultBatchSize))
	c.Workers = int(orDefault(int64(c.Workers), DefaultRelayWorkers))
	c.CatchUpLimit = int(orDefault(int64(c.CatchUpLimit), DefaultCatchUpLimit))
	c.PollInterval = orDefault(c.PollInterval, DefaultPollInterval)
	c.AckTimeout = orDefault(c.AckTimeout, DefaultAckTimeout)
	c.MaxAttempts = int(orDefault(int64(c.MaxAttempts), DefaultMaxAttempts))
	c.Lease = orDefault(c.Lease, DefaultLease)
	c.Retention = orDefault(c.Retention, DefaultRetention)
	c.PublishTimeout = orDefault(c.PublishTimeout, DefaultPublishTimeout)
	if c.AckConsumer != "" {
		c.MarkDelay = 0 // its rows are acknowledged by the ack floor, which reads marked rows
	}
	return c
}

// RelayStats counts what a relay did since it started.
type RelayStats struct {
	Published   int64 // messages the broker stored
	Duplicates  int64 // re-publishes the broker dropped inside its duplicate window
	Republished int64 // catch-up publishes of rows not acknowledged in time
	Failed      int64 // rows moved to failed or dead_letter
}

// Relay publishes a service's outbox rows to JetStream with the row id as Nats-Msg-Id, marks
// them dispatched after the broker's PubAck, publishes again the rows whose message the stream
// no longer holds, and deletes acknowledged rows past the retention. It holds rows back in the
// outbox while the stream's unread backlog fills its share (UnreadShare). Several relays may
// share one outbox.
type Relay struct {
	cfg  RelayConfig
	topo events.Topology
	pool *pgxpool.Pool
	nc   *nats.Conn
	js   jetstream.JetStream
	q    *eventsdb.Queries
	log  zerolog.Logger
	wake chan struct{}
	tr   eventtrace.Tracing

	// Rows written already claimed by this relay (Outbox.PublishOnCommit), queued by their
	// transaction's commit for the hand-off loops.
	handOffMu    sync.Mutex
	handOffQueue []claimedRow
	handOffWake  chan struct{}
	accepting    atomic.Bool // Run is up to take hand-offs

	held *heldMarks // publishes whose mark is held back (MarkDelay); nil: marked at once
	room streamRoom // how much more the stream may take before its readers catch up
	// floorAfter is the stream sequence after which the next acknowledgment round lists rows:
	// a page of rows it could not settle (their message gone and still inside the duplicate
	// window) never hides the rows after it.
	floorAfter atomic.Int64

	needTopology atomic.Bool
	rounds       *loop.Watchdog                // publish rounds in flight, to report one that never ends
	refusal      atomic.Pointer[brokerRefusal] // set while the broker refuses this relay's publishes
	published    atomic.Int64
	duplicates   atomic.Int64
	republished  atomic.Int64
	failed       atomic.Int64
}

// NewRelay returns a relay for cfg.Source's outbox in pool, publishing through nc.
func NewRelay(cfg RelayConfig, topo events.Topology, pool *pgxpool.Pool, nc *nats.Conn, log zerolog.Logger) (*Relay, error) {
	cfg = cfg.withDefaults()
	if cfg.Signer != nil && cfg.Signer.Service() != cfg.Source {
		return nil, fmt.Errorf("relay %s: the signing key is %s's", cfg.Source, cfg.Signer.Service())
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("relay %s: %w", cfg.Source, err)
	}
	// Room for every round that may be in flight: claims and hand-offs, and one catch-up batch.
	// PubAcks that do not come in time are dropped by nats.go too: left pending, they would fill
	// the bound and stall every later publish for good.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*cfg.Workers*cfg.BatchSize+cfg.CatchUpLimit),
		jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	r := &Relay{
		cfg: cfg, topo: topo, pool: pool, nc: nc, js: js, q: eventsdb.New(pool),
		log:  log.With().Str("component", "relay").Str("source", cfg.Source).Logger(),
		wake: make(chan struct{}, 1), handOffWake: make(chan struct{}, 1),
		rounds: loop.NewWatchdog(loop.StallAfter(cfg.PublishTimeout)), tr: eventtrace.New(cfg.Tracing),
	}
	if cfg.MarkDelay > 0 {
		r.held = newHeldMarks(cfg.MarkDelay, 10*r.handOffLimit())
	}
	r.needTopology.Store(true)
	return r, nil
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		Published: r.published.Load(), Duplicates: r.duplicates.Load(),
		Republished: r.republished.Load(), Failed: r.failed.Load(),
	}
}

// MaxAttempts is the refusals of a message after which its row is dead_letter
// (EVENTS_MAX_ATTEMPTS, defaulted).
func (r *Relay) MaxAttempts() int { return r.cfg.MaxAttempts }

// Run relays until ctx is cancelled. Hand-offs it has not published when it stops are released
// for any relay to claim.
func (r *Relay) Run(ctx context.Context) error {
	r.accepting.Store(true)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.listen(ctx) })
	for range r.cfg.Workers {
		g.Go(func() error { return r.dispatchLoop(ctx) })
		g.Go(func() error { return r.handOffLoop(ctx) })
	}
	g.Go(func() error { return r.maintenanceLoop(ctx) })
	g.Go(func() error { return r.roomLoop(ctx) })
	if r.cfg.AckConsumer != "" {
		g.Go(func() error { return r.ackFloorLoop(ctx) })
	}
	if r.holding() {
		g.Go(func() error { return r.markLoop(ctx) })
	}
	err := g.Wait()
	r.accepting.Store(false)
	if r.holding() {
		if markErr := r.markHeld(ctx, true); markErr != nil {
			r.log.Warn().Err(markErr).Msg("marking held publishes at stop; their rows wait for their lease")
		}
	}
	r.releaseHandOffs(ctx)
	return err
}

// Wake makes the relay look for pending rows now (LISTEN/NOTIFY does this across processes).
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// errBroker says the broker could not take messages: unreachable, or refusing for reasons of
// its own (store full, no stream leader, stream missing). It is the relay's problem, not the
// rows': they go back to pending without spending an attempt.
var errBroker = errors.New("broker unavailable")

func (r *Relay) dispatchLoop(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		n, err := r.DispatchOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errHeldBack):
			if !loop.Sleep(ctx, roomCheckEvery) {
				return nil
			}
			continue
		case err != nil:
			failures++
			delay := loop.Backoff(failures, 100*time.Millisecond, 5*time.Second)
			r.logFailure(err, failures).Int64("retry_in_ms", delay.Milliseconds()).Msg("relay round failed")
			if !loop.Sleep(ctx, delay) {
				return nil
			}
			continue
		}
		failures = 0
		if n == r.cfg.BatchSize {
			r.Wake() // more may be waiting: another round may claim them meanwhile
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-time.After(r.cfg.PollInterval):
		}
	}
	return nil
}

// logFailure logs the first failure of a streak at warn and the rest at debug, so a broker
// that is down for a minute does not flood the log.
func (r *Relay) logFailure(err error, failures int) *zerolog.Event {
	ev := r.log.Debug()
	if failures == 1 || failures%50 == 0 {
		ev = r.log.Warn()
	}
	return ev.Err(err).Int("failures", failures)
}

// DispatchOnce claims one batch of due rows, publishes them and records the outcome. It
// returns how many rows it claimed. While the broker is unreachable it claims nothing, and
// while the stream's unread backlog fills its share it claims nothing either (errHeldBack).
func (r *Relay) DispatchOnce(ctx context.Context) (int, error) {
	if err := r.ready(ctx); err != nil {
		return 0, err
	}
	if err := r.refreshRoomIfStale(ctx); err != nil {
		return 0, fmt.Errorf("%w: %w", errBroker, err)
	}
	granted := r.room.reserve(r.cfg.BatchSize)
	if granted == 0 {
		return 0, errHeldBack
	}
	rows, err := r.q.ClaimOutbox(ctx, eventsdb.ClaimOutboxParams{
		Owner: r.cfg.Owner, LeaseSeconds: r.cfg.Lease.Seconds(),
		MaxAttempts: int32(r.cfg.MaxAttempts), BatchSize: int32(granted),
	})
	r.room.refund(granted - len(rows))
	if err != nil {
		return 0, fmt.Errorf("claim outbox: %w", err)
	}
	claimed := make([]claimedRow, len(rows))
	for i, row := range rows {
		claimed[i] = claimedRow{id: row.ID, eventType: row.EventType, payload: row.Payload, attempts: row.Attempts, traceParent: deref(row.TraceContext)}
	}
	return len(rows), r.publish(ctx, claimed, claimedRound)
}

// handOffLimit is how many handed-off rows may wait for a publish round; past it, rows are
// written pending and claimed as usual, so a slow broker cannot grow the queue without bound.
func (r *Relay) handOffLimit() int { return 10 * r.cfg.BatchSize }

// handOffClaim is the claim under which an outbox writes rows it hands to the relay on commit.
type handOffClaim struct {
	owner string
	lease time.Duration
	ok    bool // false: write the rows pending, for any relay to claim
}

// handOffClaim says whether n more rows written now may be claimed for this relay and handed
// to it on commit (it runs, its broker is connected and takes messages, its queue and the
// stream have room), and under which claim.
func (r *Relay) handOffClaim(n int) handOffClaim {
	if !r.accepting.Load() || r.needTopology.Load() || r.refusal.Load() != nil || events.Healthy(r.nc) != nil {
		return handOffClaim{}
	}
	r.handOffMu.Lock()
	defer r.handOffMu.Unlock()
	if len(r.handOffQueue)+n > r.handOffLimit() {
		return handOffClaim{}
	}
	if granted := r.room.reserve(n); granted < n {
		r.room.refund(granted)
		return handOffClaim{}
	}
	return handOffClaim{owner: r.cfg.Owner, lease: r.cfg.Lease, ok: true}
}

// handOff queues rows whose transaction has committed; it never blocks.
func (r *Relay) handOff(rows []claimedRow) {
	r.handOffMu.Lock()
	r.handOffQueue = append(r.handOffQueue, rows...)
	r.handOffMu.Unlock()
	r.wakeHandOff()
}

// wakeHandOff wakes one hand-off loop (a token: several wakes before it runs are one).
func (r *Relay) wakeHandOff() {
	select {
	case r.handOffWake <- struct{}{}:
	default:
	}
}

// takeHandOffs removes up to n queued rows, oldest first.
func (r *Relay) takeHandOffs(n int) []claimedRow {
	r.handOffMu.Lock()
	defer r.handOffMu.Unlock()
	n = min(n, len(r.handOffQueue))
	if n == 0 {
		return nil
	}
	rows := append([]claimedRow(nil), r.handOffQueue[:n]...)
	r.handOffQueue = r.handOffQueue[n:]
	if len(r.handOffQueue) == 0 {
		r.handOffQueue = nil
	}
	return rows
}

// handOffLoop publishes handed-off rows a batch at a time. A round that fails releases its
// rows to pending (broker unreachable) or records them failed, as a claimed round does.
func (r *Relay) handOffLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.handOffWake:
		}
		for ctx.Err() == nil {
			rows := r.takeHandOffs(r.cfg.BatchSize)
			if len(rows) == 0 {
				break
			}
			if len(rows) == r.cfg.BatchSize {
				r.wakeHandOff() // another round for the rest
			}
			if err := r.publish(ctx, rows, handOffRound); err != nil && ctx.Err() == nil {
				r.log.Warn().Err(err).Int("rows", len(rows)).Msg("hand-off round failed; its rows wait for a claim")
				r.Wake()
			}
		}
	}
}

// releaseHandOffs gives the rows still queued when the relay stops back to pending, so that a
// relay that runs on takes them at once instead of after their lease.
func (r *Relay) releaseHandOffs(ctx context.Context) {
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The queue may hold a little more than its limit: transactions that were admitted at
	// once commit at once.
	for rows := r.takeHandOffs(r.handOffLimit()); len(rows) > 0; rows = r.takeHandOffs(r.handOffLimit()) {
		ids := make([]uuid.UUID, len(rows))
		for i, row := range rows {
			ids[i] = row.id
		}
		if _, err := r.q.ReleaseOutbox(releaseCtx, eventsdb.ReleaseOutboxParams{Ids: ids, Owner: r.cfg.Owner}); err != nil {
			r.log.Warn().Err(err).Int("rows", len(ids)).Msg("release handed-off rows; they wait for their lease")
			return
		}
	}
}

func (r *Relay) ready(ctx context.Context) error {
	if err := events.Healthy(r.nc); err != nil {
		return fmt.Errorf("%w: %w", errBroker, err)
	}
	if r.needTopology.Load() {
		if err := r.topo.EnsureStreams(ctx, r.js); err != nil {
			r.noteRefusal(0, err)
			return fmt.Errorf("%w: %w", errBroker, err)
		}
		r.needTopology.Store(false)
	}
	return nil
}

type claimedRow struct {
	id        uuid.UUID
	eventType string
	payload   []byte
	attempts  int32
	// traceParent is the trace context the row stores (its trace_context), "" when untraced.
	traceParent string
}

type publishOutcome struct {
	seq  uint64
	dups int32 // PubAcks that said duplicate (a second copy, or a re-publish inside the window)
	err  error
}

// roundKind is where a publish round's rows come from.
type roundKind int

const (
	claimedRound roundKind = iota // claimed by ClaimOutbox
	handOffRound                  // written claimed and handed off on commit
	catchUpRound                  // published before, its message no longer in the stream
)

// publish sends rows asynchronously (bounded by the batch), waits for every PubAck and then
// records the outcome in at most three statements: dispatched (or held: a hand-off round's
// marks, with MarkDelay), released, failed.
func (r *Relay) publish(ctx context.Context, rows []claimedRow, kind roundKind) error {
	republish := kind == catchUpRound
	if len(rows) == 0 {
		return nil
	}
	defer r.rounds.Begin()()
	started := time.Now()
	outcomes := r.send(ctx, rows)
	acked := time.Now() // compared with nothing but this process's clock (pubAckAges)
	if err := r.cfg.Faults.Hit(r.cfg.Source + faults.RelayAfterPublish); err != nil {
		return err
	}
	var (
		ids       []uuid.UUID
		seqs      []int64
		dups      []int32
		released  []uuid.UUID
		brokerErr error
	)
	for i, out := range outcomes {
		switch {
		case out.err == nil:
			ids = append(ids, rows[i].id)
			seqs = append(seqs, int64(out.seq))
			dups = append(dups, out.dups)
			r.duplicates.Add(int64(out.dups))
			if out.dups == 0 {
				r.published.Add(1)
			}
			if republish {
				r.republished.Add(1)
			}
		case isRowError(out.err):
			r.cfg.Metrics.PublishError("message")
			r.markFailed(ctx, rows[i], out.err)
		default:
			r.cfg.Metrics.PublishError(brokerReason(out.err))
			r.noteMissingStream(out.err)
			released = append(released, rows[i].id)
			brokerErr = out.err
		}
	}
	r.noteRefusal(len(ids), brokerErr)
	stored := 0
	for _, d := range dups {
		if d == 0 {
			stored++
		}
	}
	republished := 0
	if republish {
		republished = len(ids)
	}
	r.cfg.Metrics.Published(stored, republished, time.Since(started))
	// The marks run even when ctx is being cancelled: the broker has the messages already.
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case len(ids) == 0:
	case r.holding() && kind == handOffRound:
		// Only hand-offs: a claimed round's rows held dispatching would stay in the claim's
		// index, which every later claim of a backlog would walk through.
		r.held.hold(ids, seqs, dups, acked)
	default:
		ats := make([]time.Time, len(ids))
		for i := range ats {
			ats[i] = acked
		}
		if _, err := r.q.MarkDispatched(markCtx, eventsdb.MarkDispatchedParams{Ids: ids, Seqs: seqs, Dups: dups, Ages: pubAckAges(ats), Owner: r.cfg.Owner}); err != nil {
			return fmt.Errorf("mark %d outbox rows dispatched: %w", len(ids), err)
		}
	}
	if len(released) > 0 {
		if _, err := r.q.ReleaseOutbox(markCtx, eventsdb.ReleaseOutboxParams{Ids: released, Owner: r.cfg.Owner}); err != nil {
			return fmt.Errorf("release %d outbox rows: %w", len(released), err)
		}
		return fmt.Errorf("%w: %w", errBroker, brokerErr)
	}
	return nil
}

// send publishes rows asynchronously and waits for their PubAcks, each until the round's
// deadline (PublishTimeout after the sends): a PubAck that never comes ends as a timeout.
func (r *Relay) send(ctx context.Context, rows []claimedRow) []publishOutcome {
	outcomes := make([]publishOutcome, len(rows))
	futures := make([]jetstream.PubAckFuture, len(rows))
	extra := make([]jetstream.PubAckFuture, len(rows)) // second copies sent by the publish_twice fault
	var spans publishSpans
	defer func() { spans.end(outcomes) }()
	for i, row := range rows {
		msg := nats.NewMsg(r.topo.Subject(r.cfg.Source, row.eventType))
		msg.Data = row.payload
		spans.start(ctx, r.tr, rows, i, msg)
		if r.cfg.Signer != nil {
			r.cfg.Signer.Sign(msg)
		}
		f, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(row.id.String()))
		if err != nil {
			outcomes[i].err = err
			continue
		}
		futures[i] = f
		if r.cfg.Faults.Duplicate(r.cfg.Source + faults.RelayPublishTwice) {
			if f2, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(row.id.String())); err == nil {
				extra[i] = f2
			}
		}
	}
	deadline, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	for i, f := range futures {
		if f == nil {
			continue
		}
		outcomes[i] = awaitPubAck(deadline, f)
		if outcomes[i].err != nil {
			outcomes[i].err = fmt.Errorf("publish %s: %w", rows[i].id, outcomes[i].err)
			continue
		}
		if extra[i] != nil {
			if dup := awaitPubAck(deadline, extra[i]); dup.err == nil && dup.dups > 0 {
				outcomes[i].dups++
			}
		}
	}
	return outcomes
}

// awaitPubAck waits for one PubAck until ctx's deadline. A PubAck already in is taken even
// when the deadline has passed meanwhile (a wait for an earlier one took it all).
func awaitPubAck(ctx context.Context, f jetstream.PubAckFuture) publishOutcome {
	select {
	case ack := <-f.Ok():
		return pubAckOutcome(ack)
	case err := <-f.Err():
		return publishOutcome{err: err}
	default:
	}
	select {
	case ack := <-f.Ok():
		return pubAckOutcome(ack)
	case err := <-f.Err():
		return publishOutcome{err: err}
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return publishOutcome{err: fmt.Errorf("no PubAck in time: %w", nats.ErrTimeout)}
		}
		return publishOutcome{err: ctx.Err()}
	}
}

func pubAckOutcome(ack *jetstream.PubAck) publishOutcome {
	out := publishOutcome{seq: ack.Sequence}
	if ack.Duplicate {
		out.dups = 1
	}
	return out
}

// noteMissingStream has the topology ensured again before the next round when no stream took
// a message although the broker is connected (a stream lost with the broker's store).
func (r *Relay) noteMissingStream(err error) {
	if (isTopologyMissing(err) || errors.Is(err, nats.ErrNoResponders)) && events.Healthy(r.nc) == nil {
		r.needTopology.Store(true)
	}
}

// brokerReason names a broker-wide publish failure for the metrics: timeout or broker.
func brokerReason(err error) string {
	if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "broker"
}

// isRowError reports whether the broker refused this message itself (too large for the
// stream or the server): only such refusals count as a failed attempt. Anything else (store
// full, no stream leader, no stream, a timeout) is the broker's condition, which says nothing
// about the row: it is retried after a backoff without spending an attempt.
func isRowError(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
	}
	return errors.Is(err, nats.ErrMaxPayload)
}

func (r *Relay) markFailed(ctx context.Context, row claimedRow, cause error) {
	r.failed.Add(1)
	next := time.Now().Add(loop.Backoff(int(row.attempts), time.Second, 5*time.Minute))
	_, err := r.q.MarkFailed(context.WithoutCancel(ctx), eventsdb.MarkFailedParams{
		ID: row.id, Owner: r.cfg.Owner, MaxAttempts: int32(r.cfg.MaxAttempts),
		LastError: cause.Error(), NextAttemptAt: next,
	})
	log := r.log.Warn().Err(cause).Str("outbox_id", row.id.String()).Int32("attempts", row.attempts)
	if err != nil {
		log = r.log.Error().Err(fmt.Errorf("mark outbox %s failed: %w (publish: %w)", row.id, err, cause))
	}
	tracing.LogTraceID(log, tracing.TraceIDOf(row.traceParent)).Msg("publish refused by the broker")
}

func (r *Relay) maintenanceLoop(ctx context.Context) error {
	return r.every(ctx, r.cfg.PollInterval, r.MaintainOnce, "outbox maintenance round failed")
}

// ackFloorEvery is how often a relay with an AckConsumer reads its ack floor: often, so that
// each acknowledging statement stays small instead of a poll interval's worth of rows at once.
const ackFloorEvery = time.Second

func (r *Relay) ackFloorLoop(ctx context.Context) error {
	round := func(ctx context.Context) error {
		_, err := r.AcknowledgeAppliedOnce(ctx)
		return err
	}
	return r.every(ctx, min(ackFloorEvery, r.cfg.PollInterval), round, "acknowledgment by ack floor failed")
}

// every runs round each interval until ctx is cancelled (see loop.Every).
func (r *Relay) every(ctx context.Context, interval time.Duration, round func(context.Context) error, failed string) error {
	return loop.Every(ctx, interval, round, func(err error, failures int) { r.logFailure(err, failures).Msg(failed) })
}

// MaintainOnce runs one round of the slow duties: dead-lettering rows abandoned at the maximum
// attempts, catch-up (publishing again what the stream no longer holds) and retention. (Acknowledgments by ack floor have a loop of
// their own, every second.)
func (r *Relay) MaintainOnce(ctx context.Context) error {
	var errs []error
	if n, err := r.q.DeadLetterAbandoned(ctx, int32(r.cfg.MaxAttempts)); err != nil {
		errs = append(errs, fmt.Errorf("dead-letter abandoned outbox rows: %w", err))
	} else if n > 0 {
		r.log.Warn().Int64("rows", n).Msg("outbox rows dead-lettered: lease expired at the maximum attempts")
	}
	// One batch per round: each row is looked at once per acknowledgment timeout at most.
	if _, err := r.CatchUpOnce(ctx); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, r.deleteExpired(ctx))
	return errors.Join(errs...)
}

func (r *Relay) deleteExpired(ctx context.Context) error {
	const batch = 1000
	before := time.Now().Add(-r.cfg.Retention)
	for ctx.Err() == nil {
		n, err := r.q.DeleteAcknowledged(ctx, eventsdb.DeleteAcknowledgedParams{Before: before, BatchSize: batch})
		if err != nil {
			return fmt.Errorf("delete acknowledged outbox rows: %w", err)
		}
		if n < batch {
			return nil
		}
	}
	return nil
}

// listen wakes the dispatch loop on every NOTIFY from the outbox trigger; when the listening
// connection breaks, it reconnects with a backoff while polling carries on.
func (r *Relay) listen(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		failures++
		r.logFailure(err, failures).Msg("outbox listener lost; polling until it is back")
		if !loop.Sleep(ctx, loop.Backoff(failures, 200*time.Millisecond, 10*time.Second)) {
			return nil
		}
	}
	return nil
}

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listener connection: %w", err)
	}
	// A connection that has listened is not handed back to others.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	if err := eventsdb.New(conn).ListenOutbox(ctx); err != nil {
		return fmt.Errorf("listen outbox: %w", err)
	}
	r.Wake() // rows committed while nobody listened
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for outbox notification: %w", err)
		}
		r.Wake()
	}
}

// isTopologyMissing reports whether err says a stream or consumer does not exist (for
// example after the broker lost its store), so the caller should ensure the topology again.
func isTopologyMissing(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrConsumerDeleted)
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
