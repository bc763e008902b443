package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A failover's client figures come from the load's attempts: the longest stretch without a 201
// after the fault, and the attempts without a 2xx that ended between the fault and its end.
func TestAFailoverCountsWhatTheClientsSawUntilWritesCameBack(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return at.Add(time.Duration(s * float64(time.Second))) }
	attempts := []Attempt{
		{Sent: sec(-2), Took: time.Second, Status: 201},                         // before the fault: not counted
		{Sent: sec(-0.5), Took: time.Second, Status: 201},                       // answered after it, sent before: not the first write
		{Sent: sec(-0.2), Took: time.Second, Status: 503},                       // in flight at the fault
		{Sent: sec(1), Took: time.Second, Status: 503},                          // during
		{Sent: sec(3), Took: 5 * time.Second, Status: 0},                        // no answer
		{Sent: sec(9), Took: time.Second, Status: 201},                          // the first write after the fault, at 10 s
		{Sent: sec(9.5), Took: 2 * time.Second, Status: 201},                    // a later one
		{Sent: sec(10.5), Took: 100 * time.Millisecond, Status: 503},            // after the first write: not counted
		{Sent: sec(2), Took: 7*time.Second + 500*time.Millisecond, Status: 422}, // a refusal during
	}
	s := &System{failovers: []Failover{{How: "kill -9", From: "pg-1", To: "pg-2", At: at, Write: 9 * time.Second}}}
	got := s.takeFailovers(attempts)
	require.Len(t, got, 1)
	require.Equal(t, 9500*time.Millisecond, got[0].ClientGap)
	require.Equal(t, map[int]int{0: 1, 503: 2, 422: 1}, got[0].Errors)

	none := (&System{failovers: []Failover{{At: sec(20)}}}).takeFailovers(attempts)
	require.Zero(t, none[0].ClientGap, "no 201 after the fault: no gap to tell")
	require.Empty(t, none[0].Errors, "nothing ended after it")
}
