package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a set of durations, in milliseconds for the reports.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// Summarize computes the percentiles of ds (nearest-rank, the way latency tools report them:
// p99 of 100 samples is the 99th smallest). ds is sorted in place.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{
		Count: len(ds),
		P50:   ms(Percentile(ds, 50)),
		P90:   ms(Percentile(ds, 90)),
		P99:   ms(Percentile(ds, 99)),
		Max:   ms(ds[len(ds)-1]),
		Mean:  ms(sum / time.Duration(len(ds))),
	}
}

// Percentile returns the nearest-rank p-th percentile of sorted (0 < p <= 100).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

// Ratio is ours / limit, 0 when the limit is unknown (not measured).
func Ratio(ours, limit float64) float64 {
	if limit <= 0 || math.IsNaN(limit) || math.IsNaN(ours) {
		return 0
	}
	return round(ours/limit, 3)
}

// Sample is one reading of the two databases' row counts while load runs.
type Sample struct {
	At        time.Duration `json:"at"` // since the phase began
	Transfers int64         `json:"transfers"`
	Entries   int64         `json:"entries"`
}

// Lag is transfers committed but not yet posted.
func (s Sample) Lag() int64 { return s.Transfers - s.Entries }

// Steady describes the part of a phase after its warm-up: the rates in it and whether the lag
// (transfers not yet posted) grew.
type Steady struct {
	From, To      time.Duration // the window, from the phase's start
	TransferRate  float64       // transfers committed per second in the window
	EntryRate     float64       // entries posted per second in the window
	LagStart      int64
	LagEnd        int64
	LagSlope      float64 // least-squares slope of the lag, rows per second
	LagGrows      bool
	WindowSamples int
}

// SteadyState takes the samples from warmup of the phase on and measures rates and the lag's
// trend. The lag "grows" when its least-squares slope exceeds 2% of the transfer rate plus 2
// rows/s (sampling noise: the two counts are read a moment apart).
func SteadyState(samples []Sample, warmup time.Duration) Steady {
	var w []Sample
	for _, s := range samples {
		if s.At >= warmup {
			w = append(w, s)
		}
	}
	if len(w) < 2 {
		return Steady{WindowSamples: len(w)}
	}
	first, last := w[0], w[len(w)-1]
	secs := (last.At - first.At).Seconds()
	st := Steady{
		From: first.At, To: last.At, WindowSamples: len(w),
		TransferRate: round(float64(last.Transfers-first.Transfers)/secs, 1),
		EntryRate:    round(float64(last.Entries-first.Entries)/secs, 1),
		LagStart:     first.Lag(), LagEnd: last.Lag(),
	}
	xs := make([]float64, len(w))
	ys := make([]float64, len(w))
	for i, s := range w {
		xs[i], ys[i] = s.At.Seconds(), float64(s.Lag())
	}
	st.LagSlope = round(slope(xs, ys), 1)
	st.LagGrows = st.LagSlope > 0.02*st.TransferRate+2
	return st
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
