package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on Linux.
const clockTicks = 100

// cpuSeconds reads utime+stime of pid from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis are
	// fixed: state is field 3, utime field 14, stime field 15.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat times", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// memory reads the resident set size now and its peak (VmRSS, VmHWM) of pid, in MiB.
func memory(pid int) (rss, peak float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if key == "VmRSS" {
			rss = round(kb/1024, 1)
		} else {
			peak = round(kb/1024, 1)
		}
	}
	return rss, peak, sc.Err()
}

// ResidentMiB reads the resident set size of pid now and its peak (VmRSS, VmHWM), in MiB.
func ResidentMiB(pid int) (rss, peak float64, err error) { return memory(pid) }

// machineStat is what /proc/stat says of the whole machine since boot.
type machineStat struct {
	busy, total float64 // jiffies of all cores: all but idle and iowait, and all
	switches    float64 // context switches (the ctxt line)
}

// readMachineStat reads /proc/stat once; zero when it cannot.
func readMachineStat() machineStat {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineStat{}
	}
	return parseMachineStat(string(data))
}

// parseMachineStat reads the all-cores cpu line and the ctxt line of a /proc/stat text.
func parseMachineStat(stat string) machineStat {
	var m machineStat
	for line := range strings.Lines(stat) {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 1 && fields[0] == "cpu":
			for i, f := range fields[1:] {
				v, _ := strconv.ParseFloat(f, 64)
				m.total += v
				if i != 3 && i != 4 { // idle, iowait
					m.busy += v
				}
			}
		case len(fields) == 2 && fields[0] == "ctxt":
			m.switches, _ = strconv.ParseFloat(fields[1], 64)
		}
	}
	return m
}

// cpuMeter measures the CPU the harness's processes use over a phase: the two services, the
// broker, the PostgreSQL backends serving the run's databases, and the harness itself (the
// load generator).
type cpuMeter struct {
	procs   func() map[string]int // name -> pid of the processes to watch
	admin   *pgxpool.Pool         // lists the backends of the run's databases
	dbNames map[string]string     // label -> database name
}

type cpuSnapshot struct {
	at      time.Time
	seconds map[string]float64
	mach    machineStat
}

func (m *cpuMeter) snapshot(ctx context.Context) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), seconds: map[string]float64{}}
	for name, pid := range m.procs() {
		if pid == 0 {
			continue
		}
		if v, err := cpuSeconds(pid); err == nil {
			s.seconds[name] = v
		}
	}
	if v, err := cpuSeconds(os.Getpid()); err == nil {
		s.seconds["harness (load generator)"] = v
	}
	for label, db := range m.dbNames {
		rows, err := m.admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", db)
		if err != nil {
			continue
		}
		var total float64
		for rows.Next() {
			var pid int
			if rows.Scan(&pid) == nil {
				if v, err := cpuSeconds(pid); err == nil {
					total += v
				}
			}
		}
		rows.Close()
		s.seconds[label] = total
	}
	s.mach = readMachineStat()
	return s
}

// ProcCPU is one process's CPU over a phase.
type ProcCPU struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      float64 `json:"cores"`                 // CPU seconds per wall second
	PerEventUS float64 `json:"per_event_us"`          // CPU microseconds per transfer of the phase
	Note       string  `json:"note,omitempty"`        // caveats of the figure
	Peak       float64 `json:"peak_rss_mib,omitzero"` // VmHWM at the end of the phase
	RSS        float64 `json:"rss_mib,omitzero"`      // VmRSS at the end of the phase
}

// CPUUse is what a phase cost in CPU.
type CPUUse struct {
	Processes []ProcCPU `json:"processes"`
	// MachineBusy is the share of all cores busy over the phase, whoever used them (other
	// workers on a shared machine included): 1.0 is every core busy.
	MachineBusy float64 `json:"machine_busy"`
	Cores       int     `json:"cores"`
	// MachinePerEventUS is the whole machine's busy CPU per transfer (or event) of the phase,
	// in microseconds: every process, the kernel's work for them included. The limits measure
	// the same (PgbenchResult.MachinePerUnitUS), so the two say how far apart the pipeline's
	// cost and the bare SQL's are (docs/bench.md, "The CPU budget").
	MachinePerEventUS float64 `json:"machine_per_event_us,omitzero"`
	// SwitchesPerEvent is the machine's context switches per transfer (or event) of the phase,
	// every process's: how often something went to sleep or was put aside, which on a VM
	// where a wake-up is dear says what a phase's CPU per transfer is made of (docs/bench.md,
	// "What a wake-up costs").
	SwitchesPerEvent float64 `json:"machine_context_switches_per_event,omitzero"`
}

func diffCPU(a, b cpuSnapshot, events int64, order []string) CPUUse {
	wall := b.at.Sub(a.at).Seconds()
	use := CPUUse{Cores: runtime.NumCPU()}
	if b.mach.total > a.mach.total {
		busy := (b.mach.busy - a.mach.busy) / (b.mach.total - a.mach.total)
		use.MachineBusy = round(busy, 3)
		if events > 0 {
			use.MachinePerEventUS = round(busy*float64(use.Cores)*wall/float64(events)*1e6, 1)
		}
	}
	if events > 0 && b.mach.switches > a.mach.switches {
		use.SwitchesPerEvent = round((b.mach.switches-a.mach.switches)/float64(events), 1)
	}
	for _, name := range order {
		end, ok := b.seconds[name]
		if !ok {
			continue
		}
		sec := end - a.seconds[name]
		p := ProcCPU{Name: name, CPUSeconds: round(sec, 2), Cores: round(sec/wall, 2)}
		if events > 0 {
			p.PerEventUS = round(sec/float64(events)*1e6, 1)
		}
		if strings.HasPrefix(name, "postgres") {
			p.Note = "backends alive at both ends of the phase"
		}
		use.Processes = append(use.Processes, p)
	}
	return use
}
