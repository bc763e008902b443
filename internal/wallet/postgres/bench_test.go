package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"walletgl/internal/envtest"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// BenchmarkCreateTransfer compares one transaction per transfer (no batcher) with group commit
// (Store.Run) at 1 and 16 concurrent callers, each calling CreateTransfer in a loop between
// random pairs of 256 wallets. It reports transfers/s and commits per transfer. Run it with,
// for example:
//
//	go test ./internal/wallet/postgres -run '^$' -bench BenchmarkCreateTransfer -benchtime 5000x
func BenchmarkCreateTransfer(b *testing.B) {
	variants := []struct {
		name    string
		workers int // 0: no batcher
	}{
		{"one transaction per transfer", 0},
		{"batched 1 worker", 1},
		{"batched 2 workers", 2},
		{"batched 4 workers", 4},
	}
	for _, callers := range []int{1, 16} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("%s/%d callers", v.name, callers), func(b *testing.B) {
				benchmarkCreateTransfer(b, callers, v.workers)
			})
		}
	}
}

func benchmarkCreateTransfer(b *testing.B, callers, workers int) {
	const wallets = 256
	pool, _ := envtest.MigratedPool(b, "wallet")
	store := postgres.NewStore(pool, postgres.Options{Batch: postgres.BatchConfig{Workers: workers}})
	ctx := context.Background()
	for i := range wallets {
		// Funding sources all: the rules are still checked, but no transfer runs out of money.
		if _, err := store.CreateWallet(ctx, wallet.Wallet{ID: fmt.Sprintf("w%d", i), Currency: "USD", AllowNegative: true}); err != nil {
			b.Fatalf("create wallet: %v", err)
		}
	}
	if workers > 0 {
		runCtx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- store.Run(runCtx) }()
		b.Cleanup(func() {
			cancel()
			if err := <-stopped; err != nil {
				b.Errorf("run batcher: %v", err)
			}
		})
		for !store.BatchStats().Running {
			runtime.Gosched()
		}
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	before := store.BatchStats()
	b.ResetTimer()
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				from := rng.IntN(wallets)
				to := (from + 1 + rng.IntN(wallets-1)) % wallets
				_, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
					IdempotencyKey: fmt.Sprintf("bench-%d", i), FromWalletID: fmt.Sprintf("w%d", from),
					ToWalletID: fmt.Sprintf("w%d", to), Amount: 1, Currency: "USD",
				})
				if err != nil {
					b.Errorf("create transfer: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
	commits := float64(b.N)
	if workers > 0 {
		after := store.BatchStats()
		commits = float64(after.Batches - before.Batches + after.Fallbacks - before.Fallbacks)
	}
	b.ReportMetric(commits/float64(b.N), "commits/transfer")
}
