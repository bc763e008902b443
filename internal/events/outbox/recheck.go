package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/events"
	"walletgl/internal/events/internal/eventsdb"
)

// publishedRow is a dispatched outbox row and the stream sequence its last publish got.
type publishedRow struct {
	id  uuid.UUID
	seq int64
}

func columnsOf(rows []publishedRow) (ids []uuid.UUID, seqs []int64) {
	ids, seqs = make([]uuid.UUID, len(rows)), make([]int64, len(rows))
	for i, row := range rows {
		ids[i], seqs[i] = row.id, row.seq
	}
	return ids, seqs
}

// CatchUpOnce looks at the published rows still not acknowledged that were checked longest
// ago (at most once per acknowledgment timeout each): a row whose message the stream still
// holds at its sequence is left for its consumer, however long that one is away, so a waiting
// event has one stored copy; a row whose message left the stream (aged out, pushed out unread,
// purged, lost with the broker's store) is published again. It returns how many rows it
// published again.
func (r *Relay) CatchUpOnce(ctx context.Context) (int, error) {
	if err := r.ready(ctx); err != nil {
		return 0, err
	}
	stream, err := r.js.Stream(ctx, r.topo.StreamName(r.cfg.Source))
	if err != nil {
		return 0, fmt.Errorf("%w: look up stream: %w", errBroker, err)
	}
	due, err := r.q.ListUnacknowledgedDue(ctx, eventsdb.ListUnacknowledgedDueParams{
		AckTimeoutSeconds: r.cfg.AckTimeout.Seconds(), BatchSize: int32(r.cfg.CatchUpLimit),
	})
	if err != nil || len(due) == 0 {
		return 0, wrapErr("list unacknowledged outbox rows", err)
	}
	rows := make([]publishedRow, len(due))
	for i, row := range due {
		rows[i] = publishedRow{id: row.ID, seq: row.StreamSeq}
	}
	stored, missing, err := storedOrMissing(ctx, stream, rows)
	if err != nil {
		return 0, err
	}
	republished, left, err := r.republish(ctx, stream, missing)
	// Rows whose message is stored, and missing ones not published now, are looked at again
	// after the acknowledgment timeout.
	ids, seqs := columnsOf(append(stored, left...))
	if _, markErr := r.q.MarkChecked(context.WithoutCancel(ctx), eventsdb.MarkCheckedParams{Ids: ids, Seqs: seqs}); markErr != nil {
		err = errors.Join(err, fmt.Errorf("mark %d outbox rows checked: %w", len(ids), markErr))
	}
	return republished, err
}

// republish publishes again the rows whose message the stream no longer holds, as far as the
// stream has room for them and their last publish is older than the stream's duplicate window
// (inside it the broker would drop the re-publish as a duplicate of the message it lost) or
// than the stream itself (one made anew after the broker lost its store knows none of their
// ids: they go out at once, not a duplicate window later). It returns how many it published
// and the rows it left.
func (r *Relay) republish(ctx context.Context, stream jetstream.Stream, missing []publishedRow) (int, []publishedRow, error) {
	if len(missing) == 0 {
		return 0, nil, nil
	}
	if err := r.refreshRoomIfStale(ctx); err != nil {
		return 0, missing, fmt.Errorf("%w: %w", errBroker, err)
	}
	granted := r.room.reserve(len(missing))
	take, left := missing[:granted], missing[granted:]
	ids, seqs := columnsOf(take)
	claimed, err := r.q.ClaimDispatched(ctx, eventsdb.ClaimDispatchedParams{
		Ids: ids, Seqs: seqs, Owner: r.cfg.Owner, LeaseSeconds: r.cfg.Lease.Seconds(),
		WindowSeconds: stream.CachedInfo().Config.Duplicates.Seconds(),
		StreamCreated: stream.CachedInfo().Created,
	})
	r.room.refund(granted - len(claimed))
	if err != nil {
		return 0, missing, fmt.Errorf("claim %d outbox rows to publish again: %w", len(ids), err)
	}
	taken := make(map[uuid.UUID]bool, len(claimed))
	rows := make([]claimedRow, len(claimed))
	for i, row := range claimed {
		taken[row.ID] = true
		rows[i] = claimedRow{id: row.ID, eventType: row.EventType, payload: row.Payload, attempts: row.Attempts, traceParent: deref(row.TraceContext)}
	}
	for _, row := range take {
		if !taken[row.id] {
			left = append(left, row)
		}
	}
	if len(rows) > 0 {
		r.log.Info().Int("rows", len(rows)).Msg("publishing again the events the stream no longer holds")
	}
	return len(rows), left, r.publish(ctx, rows, catchUpRound)
}

// storedOrMissing sorts rows into those whose message the stream holds at their sequence under
// their id and those whose message it does not (a sequence below the stream's first one is
// gone without asking; another message at the sequence means the stream was made anew).
func storedOrMissing(ctx context.Context, stream jetstream.Stream, rows []publishedRow) (stored, missing []publishedRow, err error) {
	state := stream.CachedInfo().State
	held := make([]bool, len(rows))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, row := range rows {
		if row.seq <= 0 || uint64(row.seq) < state.FirstSeq || uint64(row.seq) > state.LastSeq {
			continue
		}
		g.Go(func() error {
			msg, err := stream.GetMsg(gctx, uint64(row.seq))
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("get message %d of %s: %w", row.seq, stream.CachedInfo().Config.Name, err)
			}
			held[i] = msg.Header.Get(jetstream.MsgIDHeader) == row.id.String()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	for i, row := range rows {
		if held[i] {
			stored = append(stored, row)
		} else {
			missing = append(missing, row)
		}
	}
	return stored, missing, nil
}

// ackFloorBatch is how many rows one acknowledgment round checks at most.
const ackFloorBatch = 1000

// AcknowledgeAppliedOnce acknowledges the rows the AckConsumer has acknowledged: rows at or
// below its ack floor whose message is still stored at their sequence with their id as
// Nats-Msg-Id. The ack floor alone is no evidence: it also passes messages that were purged,
// or whose sequence a stream recreated after the broker lost its store has given to another
// message. Those rows are published again at once (their copies get sequences above the
// floor), and a page of them that cannot be published yet (inside the duplicate window) is
// passed over by the next round, which starts after it: they never hide the rows after them.
// The consumer's state is read before and after the check, and the round counts only when it
// is the same consumer (the same creation time) throughout, so the floor and the stored
// messages belong to one stream. It returns how many rows it acknowledged.
func (r *Relay) AcknowledgeAppliedOnce(ctx context.Context) (int64, error) {
	if r.cfg.AckConsumer == "" || events.Healthy(r.nc) != nil {
		return 0, nil
	}
	stream, err := r.js.Stream(ctx, r.topo.StreamName(r.cfg.Source))
	if err != nil {
		return 0, fmt.Errorf("look up stream for ack floor: %w", err)
	}
	cons, err := stream.Consumer(ctx, r.cfg.AckConsumer)
	if err != nil {
		return 0, fmt.Errorf("look up consumer %s for ack floor: %w", r.cfg.AckConsumer, err)
	}
	before := cons.CachedInfo()
	listed, err := r.q.ListDispatchedUpTo(ctx, eventsdb.ListDispatchedUpToParams{
		AckFloor: int64(before.AckFloor.Stream), AfterSeq: r.floorAfter.Load(), BatchSize: ackFloorBatch,
	})
	if err != nil {
		return 0, fmt.Errorf("list outbox rows up to ack floor %d: %w", before.AckFloor.Stream, err)
	}
	r.floorAfter.Store(0) // a short page reached the floor: the next round starts from the first row
	if len(listed) == ackFloorBatch {
		r.floorAfter.Store(listed[len(listed)-1].StreamSeq)
	}
	if len(listed) == 0 {
		return 0, nil
	}
	rows := make([]publishedRow, len(listed))
	for i, row := range listed {
		rows[i] = publishedRow{id: row.ID, seq: row.StreamSeq}
	}
	stored, missing, err := storedOrMissing(ctx, stream, rows)
	if err != nil {
		return 0, err
	}
	after, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s info: %w", r.cfg.AckConsumer, err)
	}
	if !after.Created.Equal(before.Created) {
		return 0, fmt.Errorf("consumer %s was created again during the round; the floor is not this stream's", r.cfg.AckConsumer)
	}
	ids, seqs := columnsOf(stored)
	n, err := r.q.AcknowledgeDispatched(ctx, eventsdb.AcknowledgeDispatchedParams{Ids: ids, Seqs: seqs})
	if err != nil {
		return 0, fmt.Errorf("acknowledge %d outbox rows: %w", len(ids), err)
	}
	if len(missing) > 0 {
		r.log.Warn().Int("rows", len(missing)).Uint64("ack_floor", before.AckFloor.Stream).
			Msg("rows below the ack floor are not stored at their sequence (purged, aged out, or the stream was recreated); publishing them again")
		if _, _, err := r.republish(ctx, stream, missing); err != nil {
			return n, err
		}
	}
	return n, nil
}

// wrapErr wraps err with what failed, nil staying nil.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
