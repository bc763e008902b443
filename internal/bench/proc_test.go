package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The machine's context switches come from /proc/stat's ctxt line, and a phase divides what the
// machine made over it by its transfers.
func TestAPhaseCountsTheMachinesContextSwitchesPerTransfer(t *testing.T) {
	t.Parallel()
	const stat = "cpu  10 0 20 300 4 0 1 0 0 0\ncpu0 5 0 10 150 2 0 1 0 0 0\nintr 12345 0 0\nctxt 987654\nbtime 1764633600\nprocesses 42\n"
	require.Equal(t, 987654.0, parseSwitches(stat))
	require.Zero(t, parseSwitches("cpu  1 2 3 4\nintr 5\n"), "no ctxt line")
	require.Zero(t, parseSwitches("ctxt many\n"), "not a number")

	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat:", err)
	}
	before := machineSwitches()
	time.Sleep(20 * time.Millisecond) // this goroutine's thread sleeps, so the machine switches at least once
	after := machineSwitches()
	require.Positive(t, before)
	require.Greater(t, after, before)

	t0 := time.Now()
	a := cpuSnapshot{at: t0, seconds: map[string]float64{}, machBusy: 100, machAll: 400, switches: 1_000}
	b := cpuSnapshot{at: t0.Add(time.Second), seconds: map[string]float64{}, machBusy: 200, machAll: 600, switches: 8_300}
	use := diffCPU(a, b, 100, nil)
	require.Equal(t, 73.0, use.SwitchesPerEvent)

	rep := &Report{Open: &Phase{TargetRate: 100, APIRate: 100, CPU: use}}
	var line string
	for _, f := range rep.figures() {
		if strings.HasPrefix(f[0], "  CPU per transfer") {
			line = f[2]
		}
	}
	require.Contains(t, line, ", 73 context switches per transfer")

	use = diffCPU(a, cpuSnapshot{at: b.at, seconds: map[string]float64{}, machBusy: 200, machAll: 600}, 100, nil)
	require.Zero(t, use.SwitchesPerEvent, "not counted: no figure rather than a wrong one")
	rep.Open.CPU = use
	for _, f := range rep.figures() {
		if strings.HasPrefix(f[0], "  CPU per transfer") {
			require.NotContains(t, f[2], "context switches")
		}
	}
}
