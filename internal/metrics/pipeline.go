package metrics

import (
	"fmt"
	"io"
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
	Pending       float64       // walletgl_consumer_pending_messages
	OldestUnacked time.Duration // walletgl_outbox_oldest_unacknowledged_seconds
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
			}
		case "walletgl_consumer_pending_messages":
			t.Pending = sumGauges(f)
		case "walletgl_outbox_oldest_unacknowledged_seconds":
			t.OldestUnacked = time.Duration(sumGauges(f) * float64(time.Second))
		}
	}
	return t
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
