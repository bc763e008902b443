package events

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// While a broker refuses the credentials, the wait between attempts doubles from a second to
// half a minute and stays there: retried for ever, never in a tight loop.
func TestARefusedConnectionRetriesWithADoublingWait(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, authRetryDelay(n))
	}
	s := time.Second
	require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}, got)
	require.Equal(t, AuthRetryMax, authRetryDelay(1000))
}
