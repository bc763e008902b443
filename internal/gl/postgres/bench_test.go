package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/gl/postgres"
)

// BenchmarkPostHotAccounts measures what DESIGN.md's hot-account trap costs: every transfer
// posts to the same two accounts. "derived balances" is the ledger as built (append-only lines,
// balances summed when read); "balance row per account" also updates a running balance row for
// each of the two accounts in the posting transaction, as a ledger with stored balances would.
// That variant lives only in this benchmark's own table. Run it with, for example:
//
//	go test ./internal/gl/postgres -run '^$' -bench BenchmarkPostHotAccounts -benchtime 3000x
func BenchmarkPostHotAccounts(b *testing.B) {
	for _, workers := range []int{1, 16} {
		for _, variant := range []struct {
			name      string
			rowLocked bool
		}{{"derived balances", false}, {"balance row per account", true}} {
			b.Run(fmt.Sprintf("%s/%d writers", variant.name, workers), func(b *testing.B) {
				benchmarkPost(b, workers, variant.rowLocked)
			})
		}
	}
}

func benchmarkPost(b *testing.B, workers int, rowLocked bool) {
	pool, _ := envtest.MigratedPool(b, "gl")
	ledger := postgres.NewLedger(pool)
	ctx := context.Background()
	if rowLocked {
		_, err := pool.Exec(ctx, `CREATE TABLE bench_account_balances (
			account_code text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
			INSERT INTO bench_account_balances (account_code) VALUES ('1010'), ('2010');`)
		if err != nil {
			b.Fatalf("create balance rows: %v", err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				e := entry(fmt.Sprintf("bench-%d", i), "USD", 100)
				err := database.WithTx(ctx, pool, func(tx pgx.Tx) error {
					if _, err := ledger.Post(ctx, tx, e); err != nil {
						return err
					}
					if !rowLocked {
						return nil
					}
					// Debit 1010, credit 2010: each UPDATE holds the row's lock until commit,
					// so concurrent postings queue behind one another.
					for _, account := range []string{"1010", "2010"} {
						if _, err := tx.Exec(ctx, `UPDATE bench_account_balances SET balance = balance + 100
							WHERE account_code = $1`, account); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Errorf("post: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "postings/s")
}
