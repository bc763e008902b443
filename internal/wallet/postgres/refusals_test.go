package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// Concurrent requests with one key, some refused and some acceptable: the key ends up with one
// answer, a transfer or a refusal, never both, in the group commit and without it.
func TestConcurrentRefusedAndAcceptedRequestsWithOneKeyKeepOneAnswer(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(t *testing.T) (*postgres.Store, *testBundle){
		"one transaction each": func(t *testing.T) (*postgres.Store, *testBundle) {
			pool, dbURL := envtest.MigratedPool(t, "wallet")
			return postgres.NewStore(pool, postgres.Options{}), &testBundle{pool: pool, dbURL: dbURL}
		},
		"group commit": setupBatches,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, bundle := start(t)
			ctx := context.Background()
			for round := range 10 {
				from := fmt.Sprintf("payer-%d", round)
				fund(t, store, from, "USD", 100)
				createWallet(t, store, fmt.Sprintf("payee-%d", round), "USD", false)
				key := fmt.Sprintf("race-%d", round)
				var wg sync.WaitGroup
				for i := range 8 {
					amount := int64(10) // acceptable
					if i%2 == 1 {
						amount = 1000 // refused: insufficient funds
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
							IdempotencyKey: key, FromWalletID: from, ToWalletID: fmt.Sprintf("payee-%d", round), Amount: amount, Currency: "USD",
						})
						var replayed *wallet.ReplayedRefusal
						if err != nil && !errors.Is(err, wallet.ErrIdempotencyKeyReused) && !errors.Is(err, wallet.ErrIdempotencyKeyInFlight) &&
							!errors.Is(err, wallet.ErrInsufficientFunds) && !errors.As(err, &replayed) {
							t.Errorf("unexpected answer: %v", err)
						}
					}()
				}
				wg.Wait()
				var transfers, refusals int
				require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT count(*) FROM transfers WHERE idempotency_key = $1", key).Scan(&transfers))
				require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT count(*) FROM refusals WHERE idempotency_key = $1", key).Scan(&refusals))
				require.Equal(t, 1, transfers+refusals, "round %d: one answer per key (transfers %d, refusals %d)", round, transfers, refusals)
			}
		})
	}
}
