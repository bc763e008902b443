package metrics

import (
	"testing"
	"time"

	"walletgl/internal/envtest/cputime"
)

// The cost of instrumentation per event: each observation the relay, the consumer, the wallet,
// the GL and the HTTP handler make, and all that one transfer causes in both services. Besides
// ns/op (wall time, noisy on a shared machine) each reports cpu-ns/op, the process's CPU time
// (getrusage: every thread, the garbage collector's included) per operation. make bench runs
// BenchmarkPerTransfer and quotes its cpu-ns/op in the report's metrics overhead; see
// docs/bench.md#metrics-overhead.

// measure runs op b.N times and reports its CPU time per operation.
func measure(b *testing.B, op func()) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Process(b)
	for range b.N {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkPerTransfer is every observation one transfer causes in both services, with each
// per-batch and per-round observation counted once per transfer: batches of one, the upper
// bound (the bench's batches hold several transfers, so each costs less).
func BenchmarkPerTransfer(b *testing.B) {
	wallet, gl := New("wallet"), New("gl")
	occurred := time.Now()
	measure(b, func() {
		// wallet: the request, its result, its group-commit batch, the relay's round.
		wallet.ObserveHTTP("POST /v1/transfers", "POST", 201, 3*time.Millisecond)
		wallet.Transfers().Transfer("created")
		wallet.Wallet.Batch(1)
		wallet.Relay.Published(1, 0, 2*time.Millisecond)
		// gl: the delivery, its batch, the posting, and the acknowledgment's relay round.
		gl.Consumer.Pending(3)
		gl.Consumer.Processed("TransferCompleted.v1", 1, 0)
		gl.Consumer.Batch(4 * time.Millisecond)
		gl.GL.Posted(occurred, occurred.Add(8*time.Millisecond))
		gl.Relay.Published(1, 0, 2*time.Millisecond)
		// wallet again: the acknowledgment consumed.
		wallet.Consumer.Pending(3)
		wallet.Consumer.Processed("TransferPosted.v1", 1, 0)
		wallet.Consumer.Batch(4 * time.Millisecond)
	})
}

func BenchmarkObserveHTTP(b *testing.B) {
	m := New("wallet")
	measure(b, func() { m.ObserveHTTP("POST /v1/transfers", "POST", 201, 3*time.Millisecond) })
}

func BenchmarkTransfer(b *testing.B) {
	m := New("wallet")
	measure(b, func() { m.Transfers().Transfer("created") })
}

func BenchmarkRelayPublished(b *testing.B) {
	m := New("wallet")
	measure(b, func() { m.Relay.Published(1, 0, 2*time.Millisecond) })
}

func BenchmarkConsumerProcessed(b *testing.B) {
	m := New("gl")
	measure(b, func() { m.Consumer.Processed("TransferCompleted.v1", 1, 0) })
}

func BenchmarkConsumerPending(b *testing.B) {
	m := New("gl")
	measure(b, func() { m.Consumer.Pending(3) })
}

func BenchmarkHistogramObserve(b *testing.B) {
	m := New("gl")
	occurred := time.Now()
	measure(b, func() { m.GL.Posted(occurred, occurred.Add(8*time.Millisecond)) })
}
