package metrics

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Totals are the pipeline's numbers as a scrape of /metrics would read them at one moment: the
// operator console's pipeline header shows these, so it never disagrees with the dashboard.
type Totals struct {
	At        time.Time
	Published float64 // walletgl_relay_published_total
	Processed float64 // walletgl_consumer_processed_total, every event type
	// PostedCount and PostedSeconds are walletgl_commit_to_posted_seconds' count and sum (the
	// GL records it; zero in the wallet).
	PostedCount   uint64
	PostedSeconds float64
	// PostedBuckets are its cumulative buckets, by upper bound (the +Inf one left out): what a
	// quantile over a window is read from.
	PostedBuckets []Bucket
	Pending       float64       // walletgl_consumer_pending_messages
	OldestUnacked time.Duration // walletgl_outbox_oldest_unacknowledged_seconds
	// Backlog is what needs an operator's look; nil when the scrape holds none of it (a process
	// whose database gauges are not registered): unknown, never zero.
	Backlog *Backlog
}

// Backlog is the rows of a service that need an operator's look, as its scrape reads them.
type Backlog struct {
	OutboxFailed     float64 // walletgl_outbox_rows{status="failed"}
	OutboxDeadLetter float64 // walletgl_outbox_rows{status="dead_letter"}
	InboxFailed      float64 // walletgl_inbox_failed_events
	InboxWaiting     float64 // walletgl_inbox_waiting_events (0 until the consumer first counts)
}

// Totals gathers the registry, reading the outbox as a scrape does.
func (m *Metrics) Totals() (Totals, error) {
	families, err := m.reg.Gather()
	if err != nil {
		return Totals{At: time.Now()}, fmt.Errorf("gather metrics: %w", err)
	}
	return TotalsOf(families), nil
}

// ParseTotals reads the totals from a scrape of another process's GET /metrics (the text format).
func ParseTotals(r io.Reader) (Totals, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Totals{At: time.Now()}, fmt.Errorf("parse metrics: %w", err)
	}
	families := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		families = append(families, f)
	}
	return TotalsOf(families), nil
}

// TotalsOf picks the totals out of gathered metric families.
func TotalsOf(families []*dto.MetricFamily) Totals {
	t := Totals{At: time.Now()}
	var b Backlog
	var outboxRows, inboxFailed bool
	for _, f := range families {
		switch f.GetName() {
		case "walletgl_relay_published_total":
			t.Published = sumCounters(f)
		case "walletgl_consumer_processed_total":
			t.Processed = sumCounters(f)
		case "walletgl_commit_to_posted_seconds":
			for _, m := range f.GetMetric() {
				t.PostedCount += m.GetHistogram().GetSampleCount()
				t.PostedSeconds += m.GetHistogram().GetSampleSum()
				t.PostedBuckets = addBuckets(t.PostedBuckets, m.GetHistogram().GetBucket())
			}
		case "walletgl_consumer_pending_messages":
			t.Pending = sumGauges(f)
		case "walletgl_outbox_oldest_unacknowledged_seconds":
			t.OldestUnacked = time.Duration(sumGauges(f) * float64(time.Second))
		case "walletgl_outbox_rows":
			outboxRows = true
			b.OutboxFailed = gaugeOf(f, "status", "failed")
			b.OutboxDeadLetter = gaugeOf(f, "status", "dead_letter")
		case "walletgl_inbox_failed_events":
			inboxFailed = true
			b.InboxFailed = sumGauges(f)
		case "walletgl_inbox_waiting_events":
			b.InboxWaiting = sumGauges(f)
		}
	}
	if outboxRows && inboxFailed {
		t.Backlog = &b
	}
	return t
}

// gaugeOf sums the gauges of f whose label name has value.
func gaugeOf(f *dto.MetricFamily, name, value string) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return n
}

func sumCounters(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

func sumGauges(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetGauge().GetValue()
	}
	return n
}

// Bucket is a histogram's cumulative bucket: the samples at or below UpperBound (seconds).
type Bucket struct {
	UpperBound float64
	Count      uint64
}

// addBuckets adds a series' buckets to sum, bucket by bucket of the same bound (every series
// of a histogram has the same bounds).
func addBuckets(sum []Bucket, buckets []*dto.Bucket) []Bucket {
	for _, b := range buckets {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		i := slices.IndexFunc(sum, func(s Bucket) bool { return s.UpperBound == b.GetUpperBound() })
		if i < 0 {
			sum = append(sum, Bucket{UpperBound: b.GetUpperBound()})
			i = len(sum) - 1
		}
		sum[i].Count += b.GetCumulativeCount()
	}
	slices.SortFunc(sum, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	return sum
}
