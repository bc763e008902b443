//go:build slow

// The end-to-end run of the benchmark harness takes about 30 s, so a plain `go test ./...`
// leaves it out; `make test` (and so CI) runs it with -tags slow.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/tools/internal/bench"
)

// TestBenchEndToEnd runs the whole harness in a tiny configuration against the real services:
// a few hundred transfers over a few seconds. It checks that every measurement produced a
// figure, never how fast anything was.
func TestBenchEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the services and pgbench")
	}
	server := envtest.ServerURL(t)
	pgbench := "pgbench"
	if _, err := exec.LookPath(pgbench); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgbench is required under CI=true: %v", err)
		}
		t.Logf("pgbench not found: the limits are skipped")
		pgbench = ""
	}
	results := t.TempDir()
	getenv := func(k string) string {
		if k == "TEST_DATABASE_URL" {
			return server
		}
		return os.Getenv(k)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-clients", "4", "-users", "10", "-duration", "3s", "-open-duration", "2s", "-rate", "50",
		"-backlog", "300", "-scale-lines", "30000", "-peer-watermill=false", "-pgbench-time", "1s", "-pgbench", pgbench, "-results", results, "-plot",
	}, getenv, &stdout, &stderr)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "targets")

	files, err := filepath.Glob(filepath.Join(results, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(data, &rep))

	require.NotNil(t, rep.Closed)
	assert.Positive(t, rep.Closed.OK)
	assert.Zero(t, rep.Closed.Errors)
	assert.Positive(t, rep.Closed.API.P99)
	assert.Positive(t, rep.Closed.CommitToPosted.Count)
	assert.Zero(t, rep.Closed.Unposted, "every transfer reached the ledger")
	require.NotNil(t, rep.Open)
	assert.Positive(t, rep.Open.OK)
	assert.Positive(t, rep.Open.CommitToAcked.Count)
	require.NotNil(t, rep.Drain)
	assert.Positive(t, rep.Drain.DispatchRate)
	assert.Positive(t, rep.Drain.PostRate)
	assert.Positive(t, rep.Closed.CPU.MachinePerEventUS, "the machine's CPU per transfer of the closed loop")
	assert.Positive(t, rep.Drain.CPU.MachinePerEventUS, "the machine's CPU per event of the drain")
	assert.NotEmpty(t, rep.Memory)
	assert.NotEmpty(t, rep.Targets)
	require.NotNil(t, rep.Replay, "gl replay ran after the backlog")
	assert.Empty(t, rep.Replay.Error)
	assert.Positive(t, rep.Replay.Events)
	assert.Nil(t, rep.Peer, "-peer-watermill=false")
	require.NotNil(t, rep.Scale)
	assert.Empty(t, rep.Scale.Error)
	require.Len(t, rep.Scale.Sizes, 1, "one size: 30k lines, below 100k")
	assert.Equal(t, 1000, rep.Scale.Sizes[0].Reads["trial balance"].Count)
	if pgbench != "" {
		assert.Positive(t, rep.Limits.Wallet.TPS, "pgbench ran the wallet script: %s", rep.Limits.Wallet.Error)
		assert.Positive(t, rep.Limits.GL.EventsPerSec, "pgbench ran the GL script: %s", rep.Limits.GL.Error)
		assert.Zero(t, rep.Limits.Wallet.Failed)
		assert.Positive(t, rep.Limits.Wallet.MachinePerUnitUS, "the machine's CPU per transaction of the limit")
		assert.Positive(t, rep.Limits.GLTwoClients.MachinePerUnitUS, "the machine's CPU per event of the GL's limit")
		assert.Positive(t, rep.Limits.Relay.EventsPerSec, "pgbench ran the relay script: %s", rep.Limits.Relay.Error)
		assert.Positive(t, rep.Limits.RelayTwoClients.EventsPerSec, "pgbench ran the relay script at 2 clients: %s", rep.Limits.RelayTwoClients.Error)
		assert.Zero(t, rep.Limits.GL.Failed)
		assert.Zero(t, rep.Limits.Relay.Failed)
	}
	// The Metrics section: both services scraped from the start to the end, the pipeline's
	// counters seen moving, and a scrape's cost measured in each.
	require.NotNil(t, rep.Metrics)
	for _, c := range rep.Metrics.Scrapes {
		assert.GreaterOrEqual(t, c.OK, 2, "%s scraped at the start and the end", c.Service)
	}
	moved := map[string]bool{}
	for _, mv := range rep.Metrics.Metrics {
		moved[mv.Service+" "+mv.Name] = mv.Moved
		if mv.Name == "go_sched_gomaxprocs_threads" {
			assert.Equal(t, 1.0, mv.End, "%s ran with GOMAXPROCS=1, the bench's default", mv.Service)
		}
	}
	assert.True(t, moved["wallet go_sched_gomaxprocs_threads"] && moved["gl go_sched_gomaxprocs_threads"], "both runtimes report their GOMAXPROCS")
	for _, name := range []string{"wallet walletgl_transfers_total", "wallet walletgl_relay_published_total",
		"gl walletgl_consumer_processed_total", "gl walletgl_commit_to_posted_seconds", "wallet walletgl_consumer_processed_total"} {
		assert.True(t, moved[name], "%s moved", name)
	}
	require.NotNil(t, rep.Metrics.Overhead)
	assert.GreaterOrEqual(t, len(rep.Metrics.Overhead.Scrapes), 2, "notes: %v", rep.Metrics.Overhead.Notes)
	assert.Positive(t, rep.Metrics.Overhead.InstrumentationNS, "notes: %v", rep.Metrics.Overhead.Notes)
	assert.NotEmpty(t, rep.Metrics.Plans)
	markdown, err := os.ReadFile(strings.TrimSuffix(files[0], ".json") + ".md")
	require.NoError(t, err)
	assert.Contains(t, string(markdown), "## Metrics")

	for _, ext := range []string{"*.md", "*-latency.png"} {
		m, _ := filepath.Glob(filepath.Join(results, ext))
		assert.Len(t, m, 1, ext)
	}
}
