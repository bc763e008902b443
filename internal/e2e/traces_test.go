package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"walletgl/internal/systemtest"
)

// recordedSpan is a span as a service exported it over OTLP.
type recordedSpan struct {
	service, name             string
	traceID, spanID, parentID string
}

func (s recordedSpan) String() string {
	return fmt.Sprintf("%s/%s %s (parent %q)", s.service, s.name, s.spanID, s.parentID)
}

// collector is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf), the real protocol the
// services export with when OTEL_EXPORTER_OTLP_ENDPOINT names it.
type collector struct {
	mu    sync.Mutex
	spans []recordedSpan
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.receive))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) receive(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP traces request", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, recordedSpan{
					service: service, name: s.GetName(),
					traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()),
				})
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans received so far of one trace.
func (c *collector) trace(traceID string) []recordedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []recordedSpan
	for _, s := range c.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// find returns the span of service named name in spans.
func find(spans []recordedSpan, service, name string) (recordedSpan, bool) {
	for _, s := range spans {
		if s.service == service && s.name == name {
			return s, true
		}
	}
	return recordedSpan{}, false
}

// traceSteps is a transfer's trace, each span with the one it must be the child of.
var traceSteps = []struct{ service, name, parentService, parentName string }{
	{"wallet", "POST /v1/transfers", "", ""},
	{"wallet", "commit", "wallet", "POST /v1/transfers"},
	{"wallet", "publish", "wallet", "commit"},
	{"gl", "consume", "wallet", "publish"},
	{"gl", "post", "gl", "consume"},
	{"gl", "publish", "gl", "post"},
	{"wallet", "consume", "gl", "publish"},
	{"wallet", "acknowledge", "wallet", "consume"},
}

// waitForTrace waits until the collector holds every step of traceSteps in traceID and
// returns the trace.
func waitForTrace(t *testing.T, c *collector, traceID string) []recordedSpan {
	t.Helper()
	var spans []recordedSpan
	complete := func() bool {
		spans = c.trace(traceID)
		for _, step := range traceSteps {
			if _, ok := find(spans, step.service, step.name); !ok {
				return false
			}
		}
		return true
	}
	require.Eventually(t, complete, 60*time.Second, 100*time.Millisecond, "spans of trace %s: %v", traceID, spans)
	return spans
}

// requireParents checks every step's parent relation in spans.
func requireParents(t *testing.T, spans []recordedSpan, rootParent string) {
	t.Helper()
	for _, step := range traceSteps {
		span, _ := find(spans, step.service, step.name)
		if step.parentName == "" {
			require.Equal(t, rootParent, span.parentID, "%s is the child of %q", span, rootParent)
			continue
		}
		parent, _ := find(spans, step.parentService, step.parentName)
		require.Equal(t, parent.spanID, span.parentID, "%s is the child of %s", span, parent)
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestTracesFollowATransferThroughBothServices runs both binaries exporting to an OTLP
// receiver in the test: a transfer's spans, in both services, make one trace with the
// request's traceparent, and a request without one starts a trace the outbox row stores.
func TestTracesFollowATransferThroughBothServices(t *testing.T) {
	t.Parallel()
	c, endpoint := startCollector(t)
	s := startSystem(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_BSP_SCHEDULE_DELAY=100")
	ctx := context.Background()
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))

	transfer := func(t *testing.T, key string, headers map[string]string) (transferID, traceContext string) {
		t.Helper()
		headers["Idempotency-Key"] = key
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfers",
			systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: 250, Currency: "USD"}, headers)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var tr systemtest.Transfer
		require.NoError(t, resp.Decode(&tr))
		var stored *string
		require.NoError(t, s.walletDB.QueryRow(ctx,
			"SELECT o.trace_context FROM outbox o JOIN transfers t ON t.event_id = o.id WHERE t.id = $1", tr.ID).Scan(&stored))
		require.NotNil(t, stored, "the outbox row of transfer %s stores its trace context", tr.ID)
		require.Eventually(t, func() bool {
			var status string
			require.NoError(t, s.walletDB.QueryRow(ctx,
				"SELECT o.status FROM outbox o JOIN transfers t ON t.event_id = o.id WHERE t.id = $1", tr.ID).Scan(&status))
			return status == "acknowledged"
		}, 30*time.Second, 100*time.Millisecond, "transfer %s is acknowledged", tr.ID)
		return tr.ID, *stored
	}

	t.Run("a request's traceparent is the parent of every span of its transfer in both services", func(t *testing.T) {
		traceID, parentID := randomHex(t, 16), randomHex(t, 8)
		_, stored := transfer(t, "traced-1", map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"})

		spans := waitForTrace(t, c, traceID)
		requireParents(t, spans, parentID)
		commit, _ := find(spans, "wallet", "commit")
		require.Equal(t, "00-"+traceID+"-"+commit.spanID+"-01", stored, "the outbox row stores the commit span's context")
		// The wallet's log line of the transfer carries the trace id.
		require.Eventually(t, func() bool {
			return logHas(t, s.wallet, `"trace_id":"`+traceID+`"`, `"transfer created"`)
		}, 10*time.Second, 100*time.Millisecond, "the wallet logs the transfer with its trace id")
	})

	t.Run("a request without traceparent starts a new trace, which the outbox row stores", func(t *testing.T) {
		_, stored := transfer(t, "untraced-1", map[string]string{})
		parts := strings.Split(stored, "-")
		require.Len(t, parts, 4, "a traceparent: %q", stored)
		traceID, commitID := parts[1], parts[2]

		spans := waitForTrace(t, c, traceID)
		requireParents(t, spans, "") // the server span is the root of the trace
		commit, _ := find(spans, "wallet", "commit")
		require.Equal(t, commitID, commit.spanID)
	})
}

// logHas reports whether one line of p's log holds every one of parts.
func logHas(t *testing.T, p *systemtest.Process, parts ...string) bool {
	t.Helper()
	data, err := os.ReadFile(p.Log)
	require.NoError(t, err)
	for _, line := range bytes.Split(data, []byte("\n")) {
		ok := true
		for _, part := range parts {
			ok = ok && bytes.Contains(line, []byte(part))
		}
		if ok {
			return true
		}
	}
	return false
}
