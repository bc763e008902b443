package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The machine's busy jiffies and context switches come from one read of /proc/stat, and a phase
// divides the switches the machine made over it by its transfers.
func TestAPhaseCountsTheMachinesContextSwitchesPerTransfer(t *testing.T) {
	t.Parallel()
	const stat = "cpu  10 0 20 300 4 0 1 0 0 0\ncpu0 5 0 10 150 2 0 1 0 0 0\nintr 12345 0 0\nctxt 987654\nbtime 1764633600\nprocesses 42\n"
	require.Equal(t, machineStat{busy: 31, total: 335, switches: 987654}, parseMachineStat(stat), "cpu0 is not the machine; idle and iowait are not busy")
	require.Zero(t, parseMachineStat("cpu  1 2 3 4\nintr 5\n").switches, "no ctxt line")
	require.Zero(t, parseMachineStat("ctxt many\n").switches, "not a number")

	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat:", err)
	}
	before := readMachineStat()
	time.Sleep(20 * time.Millisecond) // this goroutine's thread sleeps, so the machine switches at least once
	after := readMachineStat()
	require.Positive(t, before.switches)
	require.Greater(t, after.switches, before.switches)
	require.Greater(t, after.total, before.total)

	t0 := time.Now()
	a := cpuSnapshot{at: t0, seconds: map[string]float64{}, mach: machineStat{busy: 100, total: 400, switches: 1_000}}
	b := cpuSnapshot{at: t0.Add(time.Second), seconds: map[string]float64{}, mach: machineStat{busy: 200, total: 600, switches: 8_300}}
	use := diffCPU(a, b, 100, nil)
	require.Equal(t, 73.0, use.SwitchesPerEvent)
	require.Equal(t, 0.5, use.MachineBusy)

	rep := &Report{Open: &Phase{TargetRate: 100, APIRate: 100, CPU: use}}
	var line string
	for _, f := range rep.figures() {
		if strings.HasPrefix(f[0], "  CPU per transfer") {
			line = f[2]
		}
	}
	require.Contains(t, line, ", 73 context switches per transfer")

	use = diffCPU(a, cpuSnapshot{at: b.at, seconds: map[string]float64{}, mach: machineStat{busy: 200, total: 600}}, 100, nil)
	require.Zero(t, use.SwitchesPerEvent, "not counted: no figure rather than a wrong one")
	rep.Open.CPU = use
	for _, f := range rep.figures() {
		if strings.HasPrefix(f[0], "  CPU per transfer") {
			require.NotContains(t, f[2], "context switches")
		}
	}
}
