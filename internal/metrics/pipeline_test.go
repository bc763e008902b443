package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/metrics"
)

func TestTotalsAreWhatAScrapeReads(t *testing.T) {
	t.Parallel()
	m := metrics.New("gl")
	m.Sample(func(context.Context) (metrics.OutboxSample, error) {
		return metrics.OutboxSample{Rows: map[string]int64{"pending": 1}, OldestUnacknowledged: 90 * time.Second}, nil
	})
	m.Relay.Published(7, 2, time.Millisecond)
	m.Consumer.Processed("TransferCompleted.v1", 5, 1)
	m.Consumer.Processed("Other.v1", 2, 0)
	m.Consumer.Pending(12)
	occurred := time.Now()
	m.GL.Posted(occurred, occurred.Add(250*time.Millisecond))
	m.GL.Posted(occurred, occurred.Add(750*time.Millisecond))

	in, err := m.Totals()
	require.NoError(t, err)
	require.Equal(t, 7.0, in.Published)
	require.Equal(t, 7.0, in.Processed, "every event type")
	require.Equal(t, uint64(2), in.PostedCount)
	require.InDelta(t, 1.0, in.PostedSeconds, 1e-9)
	require.Equal(t, 12.0, in.Pending)
	require.Equal(t, 90*time.Second, in.OldestUnacked)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	scraped, err := metrics.ParseTotals(res.Body)
	require.NoError(t, err)
	scraped.At = in.At
	require.Equal(t, in, scraped, "the other service's scrape reads the same numbers")
}
