package events_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/metrics"
)

// scrape returns m's /metrics as Prometheus would read it.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return string(body)
}

// The relay's looks at its stream are the broker's figures in /metrics: the stream's messages,
// bytes and limits, and each durable consumer reading it once the broker knows it.
func TestTheRelayExportsTheBrokersFiguresOfItsStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := metrics.New("wallet")
	stream := b.topo.StreamName(contract.SourceWallet)
	const n = 5
	b.addEvents(t, n)
	relay := b.relay(t, outbox.RelayConfig{PollInterval: 50 * time.Millisecond, Metrics: m.Relay})
	stopRelay := runRelay(t, relay)
	defer stopRelay()

	series := func(name, labels string) string {
		return fmt.Sprintf("%s{%sservice=\"wallet\",stream=%q} ", name, labels, stream)
	}
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, m), series("walletgl_stream_messages", "")+fmt.Sprint(n))
	}, 30*time.Second, 50*time.Millisecond, "the stream's messages")
	body := scrape(t, m)
	require.Contains(t, body, series("walletgl_stream_max_bytes", "")+fmt.Sprintf("%g", float64(b.topo.MaxBytes)))
	require.Contains(t, body, series("walletgl_stream_max_messages", "")+"-1")
	require.NotContains(t, body, series("walletgl_stream_bytes", "")+"0\n", "the stream holds bytes")
	require.NotContains(t, body, "walletgl_stream_consumer_pending_messages{", "no durable consumer yet")

	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil }))
	stopConsumer := runInBackground(t, cons.Run)
	defer stopConsumer()
	require.Eventually(t, func() bool {
		body := scrape(t, m)
		return strings.Contains(body, series("walletgl_stream_consumer_pending_messages", `consumer="gl",`)+"0") &&
			strings.Contains(body, series("walletgl_stream_consumer_ack_pending_messages", `consumer="gl",`)+"0") &&
			strings.Contains(body, series("walletgl_stream_consumer_redelivered_messages", `consumer="gl",`)+"0")
	}, 30*time.Second, 50*time.Millisecond, "the consumer read everything, as the broker counts it")
}
