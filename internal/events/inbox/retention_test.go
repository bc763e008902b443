package inbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
)

const day = 24 * time.Hour

func TestMinInboxRetentionIsTheLongerOfTheStreamsAgeAndTheOutboxRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		maxAge, window, outbox time.Duration
		want                   time.Duration
		limited                bool
	}{
		{"the stream keeps messages longer than the outbox its rows", 7 * day, 2 * time.Minute, 3 * day, 7*day + 2*time.Minute, true},
		{"the outbox keeps rows longer than the stream its messages", 7 * day, 2 * time.Minute, 10 * day, 10 * day, true},
		{"a stream without an age limit has none", 0, 2 * time.Minute, 7 * day, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, limited := inbox.MinRetention(tc.maxAge, tc.window, tc.outbox)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.limited, limited)
		})
	}
	floor, _ := inbox.MinRetention(events.DefaultStreamMaxAge, events.DefaultDuplicateWindow, outbox.DefaultRetention)
	require.GreaterOrEqual(t, inbox.DefaultRetention, floor, "the defaults go together")
}
