package inbox

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/tracing"
)

func TestEveryEventTypeHasTheNameOfTheSpanApplyingIt(t *testing.T) {
	t.Parallel()
	for _, eventType := range contract.EventTypes() {
		want := tracing.SpanPost
		if contract.Producer(eventType) == contract.SourceGL {
			want = tracing.SpanAcknowledge
		}
		require.Equal(t, want, applySpanName(eventType, ""), "%s", eventType)
	}
	require.Equal(t, tracing.SpanPost, applySpanName("", contract.TypeTransferCompletedV2),
		"an envelope without a type takes its consumer's name")
}
