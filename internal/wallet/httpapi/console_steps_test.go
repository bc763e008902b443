package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/admin"
)

// The trace's stored-in-the-stream step reads the outbox row's stream_seq, which a held mark
// (EVENTS_MARK_DELAY) writes with the acknowledgment, or never when the publishing wallet
// stopped holding it.
func TestTheTraceTellsAHeldPublishFromAnAcknowledgedRowWithoutItsRecord(t *testing.T) {
	seq := int64(7)
	stored := func(row *admin.OutboxRow) step {
		for _, s := range steps("transfer committed", eventTrace{Outbox: row}) {
			if s.Name == "stored in the stream" {
				return s
			}
		}
		t.Fatalf("no stream step for %+v", row)
		return step{}
	}
	require.Equal(t, step{"stored in the stream", "waiting", "no PubAck recorded yet"}, stored(&admin.OutboxRow{Status: "dispatching"}))
	require.Equal(t, step{"stored in the stream", "done", "its publish was not recorded"}, stored(&admin.OutboxRow{Status: "acknowledged"}))
	require.Equal(t, step{"stored in the stream", "done", ""}, stored(&admin.OutboxRow{Status: "acknowledged", StreamSeq: &seq}))
}

// A step that has not happened yet reads waiting: after a refused publish, the stream, the GL
// and the acknowledgment are each still to come.
func TestTheTraceShowsTheStepsAfterARefusedPublishAsWaiting(t *testing.T) {
	got := steps("transfer committed", eventTrace{Outbox: &admin.OutboxRow{Status: "dead_letter", LastError: "refused"}, Entries: nil})
	require.Equal(t, []step{
		{"transfer committed", "done", "with its outbox row, in one transaction"},
		{"outbox row", "failed", "dead_letter: refused"},
		{"stored in the stream", "waiting", "not stored: the broker refused the publish"},
		{"posted by the GL", "waiting", "the GL has no entry for it yet"},
		{"acknowledged", "waiting", "no acknowledgment yet"},
	}, got)
}
