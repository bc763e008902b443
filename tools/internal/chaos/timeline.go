package chaos

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Timeline records what the scenario did to the system, with times since the start.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	Events []TimelineEvent
	out    io.Writer
}

// TimelineEvent is one fault or note.
type TimelineEvent struct {
	At    time.Duration `json:"at"`
	Fault bool          `json:"fault"`
	What  string        `json:"what"`
}

func newTimeline(out io.Writer) *Timeline { return &Timeline{start: time.Now(), out: out} }

// Fault records a fault injected.
func (t *Timeline) Fault(format string, args ...any) { t.add(true, format, args...) }

// Note records something worth knowing that is not a fault.
func (t *Timeline) Note(format string, args ...any) { t.add(false, format, args...) }

func (t *Timeline) add(fault bool, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := TimelineEvent{At: time.Since(t.start).Round(time.Millisecond), Fault: fault, What: fmt.Sprintf(format, args...)}
	t.Events = append(t.Events, ev)
	if t.out != nil {
		kind := "note "
		if fault {
			kind = "FAULT"
		}
		fmt.Fprintf(t.out, "  %8s  %s  %s\n", ev.At, kind, ev.What)
	}
}

// Faults counts the faults recorded.
func (t *Timeline) Faults() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.Events {
		if e.Fault {
			n++
		}
	}
	return n
}
