package outbox

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestHeldMarksComeDueOldestFirstAndPastTheirLimitAtOnce(t *testing.T) {
	h := newHeldMarks(time.Second, 3)
	t0 := time.Now()
	ids := make([]uuid.UUID, 5)
	for i := range ids {
		ids[i] = uuid.New()
	}
	h.hold(ids[:2], []int64{1, 2}, []int32{0, 1}, t0)
	h.hold(ids[2:], []int64{3, 4, 5}, []int32{0, 0, 0}, t0.Add(100*time.Millisecond))
	h.forget(ids[1:2]) // acknowledged with its details: never marked

	// Five held, one forgotten: four, one past the limit of three, so the oldest comes due now.
	got, marks := h.takeDue(t0, false)
	require.Equal(t, ids[:1], got)
	require.Equal(t, []heldMark{{seq: 1, at: t0}}, marks)
	got, _ = h.takeDue(t0.Add(999*time.Millisecond), false)
	require.Empty(t, got, "three held, none due")
	require.Equal(t, []heldMark{{}, {seq: 3, at: t0.Add(100 * time.Millisecond)}}, h.lookup(ids[1:3]))

	got, _ = h.takeDue(t0.Add(1100*time.Millisecond), false)
	require.Equal(t, ids[2:], got, "due a delay after their PubAck")
	h.hold(ids[:1], []int64{9}, []int32{0}, t0)
	got, _ = h.takeDue(t0, true)
	require.Equal(t, ids[:1], got, "all, due or not, when the relay stops")
	require.Empty(t, h.byID)
	require.Empty(t, h.order)
}
