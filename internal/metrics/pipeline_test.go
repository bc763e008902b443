package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/metrics"
)

func TestTotalsAreWhatAScrapeReads(t *testing.T) {
	t.Parallel()
	m := metrics.New("gl")
	m.Sample(func(context.Context) (metrics.OutboxSample, error) {
		return metrics.OutboxSample{Rows: map[string]int64{"pending": 1, "failed": 3, "dead_letter": 2}, OldestUnacknowledged: 90 * time.Second}, nil
	})
	m.SampleInbox(1000, func(context.Context) (int64, error) { return 4, nil })
	m.Consumer.Waiting(5, time.Minute)
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
	require.Equal(t, &metrics.Backlog{OutboxFailed: 3, OutboxDeadLetter: 2, InboxFailed: 4, InboxWaiting: 5}, in.Backlog)

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

// A process whose database gauges are not registered has no backlog to read: unknown, not zero.
func TestTotalsWithoutTheDatabaseGaugesHaveNoBacklog(t *testing.T) {
	t.Parallel()
	m := metrics.New("gl")
	m.Consumer.Waiting(0, 0)
	in, err := m.Totals()
	require.NoError(t, err)
	require.Nil(t, in.Backlog)
}

// The inbox's failed gauge counts the failed events of the database at each scrape: a resolved
// event and a waiting one are not failed.
func TestTheInboxFailedGaugeCountsTheUnresolvedFailedEvents(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	m := metrics.New("gl")
	m.Sample(admin.New(pool).OutboxOpen)
	m.SampleInbox(admin.HealthCap, admin.New(pool).InboxFailed)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, payload, waits_for,
		                   resolved_at, resolved_by, resolution)
		VALUES ('gl:f1', 'gl', 'f1', 'TransferCompleted.v2', 'failed', 'conflict', 'another amount', '\x00', NULL, NULL, NULL, NULL),
		       ('gl:f2', 'gl', 'f2', 'TransferCompleted.v2', 'failed', 'malformed', 'bad json', '\x00', NULL, NULL, NULL, NULL),
		       ('gl:r1', 'gl', 'r1', 'TransferCompleted.v2', 'resolved', 'malformed', 'bad json', '\x00', NULL, now(), 'ops', 'replayed by hand'),
		       ('gl:w1', 'gl', 'w1', 'TransferReversed.v1', 'waiting', NULL, NULL, '\x00', 'transfer:x', NULL, NULL, NULL)`)
	require.NoError(t, err)

	in := scrape(t, m)
	require.NotNil(t, in.Backlog)
	require.Equal(t, 2.0, in.Backlog.InboxFailed, "the failed events, not the resolved or the waiting one")

	_, err = pool.Exec(ctx, `UPDATE inbox SET status = 'resolved', resolved_at = now(), resolved_by = 'ops', resolution = 'closed' WHERE id = 'gl:f1'`)
	require.NoError(t, err)
	require.Equal(t, 1.0, scrape(t, m).Backlog.InboxFailed, "read again at the next scrape")
}

// scrape reads m's totals as another process does: GET /metrics, parsed.
func scrape(t *testing.T, m *metrics.Metrics) metrics.Totals {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	in, err := metrics.ParseTotals(res.Body)
	require.NoError(t, err)
	return in
}
