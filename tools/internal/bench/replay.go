package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Replay is `gl replay --from-start` of the wallet's stream as the backlog phase left it (issue
// 16, target 5): the events and the rate are the command's own, from its stdout.
type Replay struct {
	Events  int64   `json:"events"`
	Rate    float64 `json:"events_per_second"`
	Seconds float64 `json:"seconds"` // the command's run, start-up and migration included
	Error   string  `json:"error,omitempty"`
}

// measureReplay runs the built gl binary's replay, with the bench's GL settings, into a scratch
// database of its own, dropped afterwards.
func measureReplay(ctx context.Context, sys *system, opts Options, runID string, out io.Writer) *Replay {
	rp := &Replay{}
	url, drop, err := runDatabase(ctx, opts, runID, "replay_gl")
	if err != nil {
		rp.Error = err.Error()
		return rp
	}
	defer drop()
	cmd := exec.CommandContext(ctx, sys.gl.Bin, "replay", "--from-start", "--no-reconcile", "--into", url)
	cmd.Env = append(os.Environ(), sys.gl.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	stop := progress(ctx, out, opts.TTY, func() string {
		return fmt.Sprintf("replay %5.1fs", time.Since(started).Seconds())
	})
	err = cmd.Run()
	stop()
	rp.Seconds = round(time.Since(started).Seconds(), 2)
	if err != nil {
		rp.Error = fmt.Sprintf("gl replay: %v: %s", err, firstLine(strings.TrimSpace(stderr.String())))
		return rp
	}
	if rp.Events, rp.Rate, err = ParseReplay(stdout.String()); err != nil {
		rp.Error = err.Error()
		return rp
	}
	fmt.Fprintf(out, "  replayed %d events at %.0f/s (%.1fs with start-up)\n", rp.Events, rp.Rate, rp.Seconds)
	return rp
}

// ParseReplay reads the events and the rate from gl replay's summary: the lines
// "  events read          N" and "  rate                 N events/s".
func ParseReplay(stdout string) (events int64, rate float64, err error) {
	var seenEvents, seenRate bool
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "events read "):
			events, err = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "events read")), 10, 64)
			seenEvents = err == nil
		case strings.HasPrefix(line, "rate ") && strings.HasSuffix(line, " events/s"):
			f := strings.Fields(line)
			rate, err = strconv.ParseFloat(f[1], 64)
			seenRate = err == nil
		}
	}
	if !seenEvents || !seenRate {
		return 0, 0, fmt.Errorf("gl replay's summary has no events read and rate lines: %q", firstLine(stdout))
	}
	return events, rate, nil
}
