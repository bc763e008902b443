package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/metrics"
)

// UnreadShare is the share of a stream's byte limit (EVENTS_STREAM_MAX_BYTES) that events no
// consumer has read yet may fill. Past it the relay holds rows back in the outbox, which is
// the record, instead of publishing them into a stream that would push unread events out (a
// full stream discards its oldest messages, which at steady state have long been read). The
// rest of the limit is room for the history that stays replayable and for what several relays
// publish between two looks at the stream.
const UnreadShare = 0.5

// roomCheckEvery is how often a running relay reads its stream's state and its readers' to
// know how much it may publish.
const roomCheckEvery = time.Second

// defaultMessageBytes stands in for a stream's mean message size while it holds none.
const defaultMessageBytes = 1024

// errHeldBack says the relay publishes nothing now: the stream's unread backlog fills its
// share of the stream. Rows wait in the outbox; it is no failure.
var errHeldBack = errors.New("the stream's unread backlog fills its share of the stream: rows wait in the outbox")

// streamRoom is how many more messages a relay may publish into its stream before the events
// no consumer has read fill UnreadShare of the stream's byte limit: read from the broker at
// most every roomCheckEvery, and spent by each publish round in between (reserve), so a relay
// cannot run past it in the meantime.
type streamRoom struct {
	mu        sync.Mutex
	checked   time.Time // zero: never read
	unlimited bool      // the stream has no byte limit
	bytes     int64     // room left, in bytes (spent by reservations until the next look)
	perMsg    int64     // mean stored message size
	unread    uint64    // messages not yet read by the slowest reader, at the last look
	held      bool      // the last look found no room for one message
}

// roomState is what one look at the broker says.
type roomState struct {
	unlimited bool
	limit     int64  // the stream's byte limit
	unread    uint64 // messages the slowest reader has not acknowledged
	perMsg    int64
}

// set replaces what the room knew by a look at the broker, taken at now. held says whether
// the look found no room for one message, changed whether that differs from the last look.
func (s *streamRoom) set(now time.Time, st roomState) (held, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked, s.unlimited, s.perMsg, s.unread = now, st.unlimited, st.perMsg, st.unread
	s.bytes = int64(float64(st.limit)*UnreadShare) - int64(st.unread)*st.perMsg
	held = !s.unlimited && s.bytes < s.perMsg
	changed, s.held = held != s.held, held
	return held, changed
}

// stale reports whether the room was last read longer than d before now, or never.
func (s *streamRoom) stale(now time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checked.IsZero() || now.Sub(s.checked) > d
}

// reserve takes room for up to n messages and returns for how many it did: 0 when there is
// none left until the next look, or the room was never read.
func (s *streamRoom) reserve(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.checked.IsZero():
		return 0
	case s.unlimited:
		return n
	}
	granted := int(min(int64(n), max(s.bytes/s.perMsg, 0)))
	s.bytes -= int64(granted) * s.perMsg
	return granted
}

// refund gives back the room of n messages reserved and not published.
func (s *streamRoom) refund(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unlimited {
		s.bytes += int64(n) * s.perMsg
	}
}

// readRoom looks at the relay's stream and at each durable consumer that reads it: the
// stream's byte limit, its mean message size, and how many messages the slowest reader has
// not acknowledged yet (delivered and unacknowledged, and not yet delivered). A reader the
// broker does not know has read nothing: every message in the stream is unread to it. What it
// read is the broker's figures in /metrics (walletgl_stream_*).
func (r *Relay) readRoom(ctx context.Context) (roomState, error) {
	name := r.topo.StreamName(r.cfg.Source)
	stream, err := r.js.Stream(ctx, name)
	if err != nil {
		return roomState{}, fmt.Errorf("look up stream %s: %w", name, err)
	}
	info := stream.CachedInfo()
	st := roomState{limit: info.Config.MaxBytes, unlimited: info.Config.MaxBytes <= 0, perMsg: defaultMessageBytes}
	if info.State.Msgs > 0 {
		st.perMsg = max(int64(info.State.Bytes/info.State.Msgs), 1)
	}
	var readers []metrics.ReaderState
	for _, reader := range r.topo.Readers(r.cfg.Source) {
		cons, err := stream.Consumer(ctx, reader)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			st.unread = max(st.unread, info.State.Msgs)
		case err != nil:
			return roomState{}, fmt.Errorf("look up consumer %s on %s: %w", reader, name, err)
		default:
			ci := cons.CachedInfo()
			st.unread = max(st.unread, ci.NumPending+uint64(ci.NumAckPending))
			readers = append(readers, metrics.ReaderState{Name: reader, Pending: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered})
		}
	}
	r.cfg.Metrics.Stream(metrics.StreamState{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		MaxMessages: info.Config.MaxMsgs, MaxBytes: info.Config.MaxBytes}, readers)
	return st, nil
}

// refreshRoom reads the room from the broker, and logs when the relay starts or stops holding
// rows back.
func (r *Relay) refreshRoom(ctx context.Context) error {
	st, err := r.readRoom(ctx)
	if err != nil {
		return err
	}
	held, changed := r.room.set(time.Now(), st)
	if !changed {
		return nil
	}
	r.cfg.Metrics.HeldBack(held)
	if held {
		r.log.Warn().Uint64("unread", st.unread).Int64("max_bytes", st.limit).Float64("unread_share", UnreadShare).
			Msg("holding rows back in the outbox: the events the consumer has not read fill their share of the stream")
	} else {
		r.log.Info().Uint64("unread", st.unread).Msg("publishing again: the consumer has read enough of the stream")
	}
	return nil
}

// refreshRoomIfStale reads the room unless a look at the broker is at most twice
// roomCheckEvery old (the room loop keeps it fresher while the relay runs).
func (r *Relay) refreshRoomIfStale(ctx context.Context) error {
	if !r.room.stale(time.Now(), 2*roomCheckEvery) {
		return nil
	}
	return r.refreshRoom(ctx)
}

// roomLoop reads the room every roomCheckEvery while the relay runs.
func (r *Relay) roomLoop(ctx context.Context) error {
	if err := r.refreshRoom(ctx); err != nil && ctx.Err() == nil {
		r.log.Debug().Err(err).Msg("read the stream's room")
	}
	return r.every(ctx, roomCheckEvery, r.refreshRoom, "reading the stream's room failed")
}
