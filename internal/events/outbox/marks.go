package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/database"
	"walletgl/internal/events/internal/eventsdb"
)

// DefaultMarkDelay is the wallet relay's EVENTS_MARK_DELAY: how long it holds a publish on
// commit's mark back for the GL's acknowledgment to write it. (A RelayConfig's zero MarkDelay
// is not defaulted: it marks at once.)
const DefaultMarkDelay = time.Second

// maxMarksPerStatement bounds one MarkDispatched of held marks.
const maxMarksPerStatement = 1000

// heldMark is what a PubAck said of a row, kept until the row is acknowledged or marked.
type heldMark struct {
	seq  int64
	dups int32
	at   time.Time // when the PubAck came (this process's monotonic clock): the row's dispatched_at
}

// columns are marks as the queries take them: stream sequences, duplicates, and the ages of
// the PubAcks now in seconds (pubAckAges).
func columns(marks []heldMark) (seqs []int64, dups []int32, ages []float64) {
	seqs, dups, ats := make([]int64, len(marks)), make([]int32, len(marks)), make([]time.Time, len(marks))
	for i, m := range marks {
		seqs[i], dups[i], ats[i] = m.seq, m.dups, m.at
	}
	return seqs, dups, pubAckAges(ats)
}

// pubAckAges are the ages of PubAcks in seconds, as the queries take them: a row's
// dispatched_at is the database's clock less its age, so that no time this host's clock
// read is ever compared with one the database's clock read. An age with no PubAck (a zero
// time: not held) is 0.
func pubAckAges(ats []time.Time) []float64 {
	ages := make([]float64, len(ats))
	for i, at := range ats {
		if !at.IsZero() {
			ages[i] = max(time.Since(at).Seconds(), 0)
		}
	}
	return ages
}

// heldMarks are the publishes on commit whose mark a relay holds back: the outbox rows stay
// dispatching, under the relay's lease, until the consumer beside the relay acknowledges them
// (and writes the details in the same update) or the delay runs out and the relay marks them
// as it would have at once. Rows a relay that dies holds stay dispatching until their lease
// runs out, and are published again then unless acknowledged first, as after a death between
// publish and mark.
type heldMarks struct {
	delay time.Duration
	limit int // past this many held, the oldest are marked without waiting

	mu    sync.Mutex
	byID  map[uuid.UUID]heldMark
	order []heldID // oldest first; ids acknowledged meanwhile are skipped when they come due
}

type heldID struct {
	id  uuid.UUID
	due time.Time
}

func newHeldMarks(delay time.Duration, limit int) *heldMarks {
	return &heldMarks{delay: delay, limit: limit, byID: map[uuid.UUID]heldMark{}}
}

// hold keeps the marks of ids (seqs, dups and at as MarkDispatched takes them).
func (h *heldMarks) hold(ids []uuid.UUID, seqs []int64, dups []int32, at time.Time) {
	due := at.Add(h.delay)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range ids {
		h.byID[id] = heldMark{seq: seqs[i], dups: dups[i], at: at}
		h.order = append(h.order, heldID{id: id, due: due})
	}
}

// lookup returns what is held of ids, a zero heldMark (seq 0) for each one not held.
func (h *heldMarks) lookup(ids []uuid.UUID) []heldMark {
	marks := make([]heldMark, len(ids))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range ids {
		marks[i] = h.byID[id]
	}
	return marks
}

// forget drops ids, whose acknowledgment wrote their details.
func (h *heldMarks) forget(ids []uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.byID, id)
	}
	if len(h.byID) == 0 {
		h.order = nil
	}
}

// takeDue removes and returns the held marks due at now, and the oldest past the limit; all
// of them when all is set.
func (h *heldMarks) takeDue(now time.Time, all bool) (ids []uuid.UUID, marks []heldMark) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for ; n < len(h.order); n++ {
		e := h.order[n]
		if !all && e.due.After(now) && len(h.byID) <= h.limit {
			break
		}
		if m, ok := h.byID[e.id]; ok {
			delete(h.byID, e.id)
			ids = append(ids, e.id)
			marks = append(marks, m)
		}
	}
	h.order = h.order[n:]
	if len(h.order) == 0 {
		h.order = nil
	}
	return ids, marks
}

// holding says whether this relay holds its marks back: only when the consumer beside it
// acknowledges its rows (no AckConsumer) and a delay is set.
func (r *Relay) holding() bool { return r.held != nil }

// markLoop marks the held publishes whose delay ran out, a few times per delay.
func (r *Relay) markLoop(ctx context.Context) error {
	round := func(ctx context.Context) error { return r.markHeld(ctx, false) }
	return r.every(ctx, max(r.cfg.MarkDelay/4, 10*time.Millisecond), round, "marking held publishes failed")
}

// markHeld marks the held publishes that are due (all of them with all), as MarkDispatched
// after a PubAck. Rows acknowledged meanwhile without their details (by a consumer that does
// not run beside this relay) get them from RecordPublishes. Marks that fail are logged and
// dropped: their rows stay dispatching until their lease runs out and are published again,
// unless they are acknowledged first.
func (r *Relay) markHeld(ctx context.Context, all bool) error {
	ids, marks := r.held.takeDue(time.Now(), all)
	var errs []error
	for from := 0; from < len(ids); from += maxMarksPerStatement {
		to := min(from+maxMarksPerStatement, len(ids))
		errs = append(errs, r.markHeldBatch(ctx, ids[from:to], marks[from:to]))
	}
	return errors.Join(errs...)
}

func (r *Relay) markHeldBatch(ctx context.Context, ids []uuid.UUID, marks []heldMark) error {
	seqs, dups, ages := columns(marks)
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n, err := r.q.MarkDispatched(markCtx, eventsdb.MarkDispatchedParams{Ids: ids, Seqs: seqs, Dups: dups, Ages: ages, Owner: r.cfg.Owner})
	if err != nil {
		return fmt.Errorf("mark %d held outbox rows dispatched: %w", len(ids), err)
	}
	if n == int64(len(ids)) {
		return nil
	}
	if _, err := r.q.RecordPublishes(markCtx, eventsdb.RecordPublishesParams{Ids: ids, Seqs: seqs, Dups: dups, Ages: ages}); err != nil {
		return fmt.Errorf("record the publishes of %d acknowledged outbox rows: %w", len(ids), err)
	}
	return nil
}

// Acknowledge moves the outbox rows with these ids to acknowledged in db, the consumer's
// transaction, as Outbox.Acknowledge does; rows whose mark this relay holds get their
// publish's details in the same update, and the relay forgets them once db commits. It
// returns how many rows moved.
func (r *Relay) Acknowledge(ctx context.Context, db database.Executor, ids ...uuid.UUID) (int64, error) {
	if !r.holding() {
		return New(r.cfg.Source).Acknowledge(ctx, db, ids...)
	}
	seqs, dups, ages := columns(r.held.lookup(ids))
	n, err := eventsdb.New(db).AcknowledgePublished(ctx, eventsdb.AcknowledgePublishedParams{
		Ids: ids, Seqs: seqs, Dups: dups, Ages: ages, Owner: r.cfg.Owner,
	})
	if err != nil {
		return 0, fmt.Errorf("acknowledge outbox %v: %w", ids, err)
	}
	database.AfterCommit(db, func() { r.held.forget(ids) })
	return n, nil
}
