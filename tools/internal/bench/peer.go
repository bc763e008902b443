package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"walletgl/internal/systemtest"
)

// Peer is another outbox forwarder draining the same number of rows on the same machine (issue
// 16, target 2): Watermill's SQL forwarder into JetStream, a module of its own in peers/watermill.
type Peer struct {
	Rows            int     `json:"rows"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	Error           string  `json:"error,omitempty"` // not measured, and why
}

// measureWatermill runs `GOWORK=off go -C peers/watermill run .` on rows rows, with a scratch
// database of its own (dropped afterwards) and a fresh stream on the bench's broker; the peer
// prints one JSON line, {"rows":N,"seconds":S,"events_per_second":R}.
func measureWatermill(ctx context.Context, opts Options, runID, natsURL string, rows int, out io.Writer) *Peer {
	p := &Peer{Rows: rows}
	root, err := systemtest.ModuleRoot(ctx)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	dir := filepath.Join(root, "peers", "watermill")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		p.Error = "peers/watermill missing"
		return p
	}
	url, drop, err := runDatabase(ctx, opts, runID, "peer_watermill")
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer drop()
	stream := "PEER_WATERMILL_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fmt.Fprintf(out, "watermill: draining %d rows with its SQL forwarder into stream %s …\n", rows, stream)
	cmd := exec.CommandContext(ctx, "go", "-C", dir, "run", ".",
		"-rows", strconv.Itoa(rows), "-database-url", url, "-nats-url", natsURL, "-stream", stream)
	// The peer runs on the versions its own go.mod pins, outside the repository's workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		p.Error = fmt.Sprintf("peers/watermill: %v: %s", err, firstLine(strings.TrimSpace(stderr.String())))
		return p
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		Rows            int     `json:"rows"`
		Seconds         float64 `json:"seconds"`
		EventsPerSecond float64 `json:"events_per_second"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.EventsPerSecond <= 0 {
		p.Error = fmt.Sprintf("peers/watermill printed no result line: %q", lines[len(lines)-1])
		return p
	}
	p.Rows, p.Seconds, p.EventsPerSecond = res.Rows, res.Seconds, res.EventsPerSecond
	fmt.Fprintf(out, "  watermill drained %d rows in %.2fs, %.0f/s\n", p.Rows, p.Seconds, p.EventsPerSecond)
	return p
}
