package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// Verify checks the wallet's invariants on the data in pool as it is: each transfer has exactly
// one outbox row and each outbox row its transfer, every balance is what its transfers add up
// to, every currency's balances sum to zero, no balance is below its floor, and every reversal
// moves its transfer's money back, the reversals of a transfer totalling at most its amount;
// every wallet's held is the sum of its pending holds, every hold has its events (and a
// captured one its transfer) and every hold event its hold.
func Verify(ctx context.Context, pool *pgxpool.Pool, opts wallet.VerifyOptions) ([]wallet.Check, error) {
	q := walletdb.New(pool)
	type result = struct {
		Checked, Failed int64
		Sample          []string
	}
	n := int32(wallet.VerifySampleSize)
	checks := []struct {
		name, unit string
		run        func() (result, error)
	}{
		{"every transfer has exactly one outbox row", "transfers", func() (result, error) {
			r, err := q.VerifyTransfersHaveOutbox(ctx, walletdb.VerifyTransfersHaveOutboxParams{
				SampleSize: n, RetentionSeconds: opts.Retention.Seconds(),
			})
			return result(r), err
		}},
		{"every outbox row has its transfer", "outbox rows", func() (result, error) {
			r, err := q.VerifyOutboxHasTransfers(ctx, n)
			return result(r), err
		}},
		{"every balance equals its transfers in minus out", "wallets", func() (result, error) {
			r, err := q.VerifyBalancesMatchTransfers(ctx, n)
			return result(r), err
		}},
		{"balances sum to zero per currency", "currencies", func() (result, error) {
			r, err := q.VerifyCurrencyTotalsZero(ctx, n)
			return result(r), err
		}},
		{"no balance below its floor", "wallets", func() (result, error) {
			r, err := q.VerifyBalanceFloors(ctx, n)
			return result(r), err
		}},
		{"every reversal moves its transfer's money back, and reversals total at most the transfer", "transfers", func() (result, error) {
			r, err := q.VerifyReversals(ctx, n)
			return result(r), err
		}},
		{"every wallet's held is the sum of its pending holds", "wallets", func() (result, error) {
			r, err := q.VerifyHeldMatchesHolds(ctx, n)
			return result(r), err
		}},
		{"every hold has its events, a captured one its transfer, and every hold event its hold", "holds and hold events", func() (result, error) {
			r, err := q.VerifyHolds(ctx, walletdb.VerifyHoldsParams{SampleSize: n, RetentionSeconds: opts.Retention.Seconds()})
			return result(r), err
		}},
		{"every batch has its legs and one event, and every batch reversal reverses legs of its batch", "batches and batch reversals", func() (result, error) {
			r, err := q.VerifyBatches(ctx, walletdb.VerifyBatchesParams{SampleSize: n, RetentionSeconds: opts.Retention.Seconds()})
			return result(r), err
		}},
	}
	out := make([]wallet.Check, 0, len(checks))
	for _, c := range checks {
		r, err := c.run()
		if err != nil {
			return nil, fmt.Errorf("verify %q: %w", c.name, interpretError(err))
		}
		out = append(out, wallet.Check{Name: c.name, Unit: c.unit, Checked: r.Checked, Failed: r.Failed, Sample: r.Sample})
	}
	return out, nil
}
