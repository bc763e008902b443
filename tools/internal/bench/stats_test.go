package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"an empty set has no percentile", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100 is the 50th value", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100 is the 99th value", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p90 of four rounds the rank up", ms(1, 2, 3, 4), 90, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Percentile(tt.sorted, tt.p))
		})
	}
}

func TestSummarizeSortsAndReportsMilliseconds(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}
	got := Summarize(ds)
	assert.Equal(t, Latency{Count: 4, P50: 2, P90: 10, P99: 10, Max: 10, Mean: 4}, got)
}

func TestRatio(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0.5, Ratio(500, 1000))
	assert.Equal(t, 1.333, Ratio(4, 3), "three decimals")
	assert.Equal(t, 0.0, Ratio(500, 0), "an unmeasured limit gives no ratio")
}

func TestSteadyStateSeesALagThatGrows(t *testing.T) {
	t.Parallel()
	var keepsUp, fallsBehind []Sample
	for i := range 21 {
		at := time.Duration(i) * 500 * time.Millisecond
		keepsUp = append(keepsUp, Sample{At: at, Transfers: int64(i * 500), Entries: int64(i*500 - 40)})
		fallsBehind = append(fallsBehind, Sample{At: at, Transfers: int64(i * 500), Entries: int64(i * 400)})
	}
	st := SteadyState(keepsUp, 2*time.Second)
	require.Equal(t, 17, st.WindowSamples, "samples before the warm-up are left out")
	assert.Equal(t, 1000.0, st.TransferRate)
	assert.Equal(t, 1000.0, st.EntryRate)
	assert.False(t, st.LagGrows)

	st = SteadyState(fallsBehind, 2*time.Second)
	assert.Equal(t, 800.0, st.EntryRate)
	assert.Equal(t, 200.0, st.LagSlope)
	assert.True(t, st.LagGrows)
}
