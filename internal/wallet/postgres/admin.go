package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"walletgl/internal/events"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/walletdb"
)

var _ wallet.Admin = (*Store)(nil)

// OutboxStats counts the outbox rows per status and dates the oldest waiting ones.
func (s *Store) OutboxStats(ctx context.Context) (events.OutboxStats, error) {
	stats, err := s.admin.OutboxStats(ctx)
	return stats, adminError("outbox stats", err)
}

// ListOutbox returns up to limit outbox rows in status.
func (s *Store) ListOutbox(ctx context.Context, status string, limit int) ([]events.OutboxRow, error) {
	rows, err := s.admin.ListOutbox(ctx, status, limit)
	return rows, adminError("list outbox", err)
}

// GetOutbox returns one outbox row.
func (s *Store) GetOutbox(ctx context.Context, id uuid.UUID) (events.OutboxRow, error) {
	row, err := s.admin.GetOutbox(ctx, id)
	return row, adminError("get outbox", err)
}

// RequeueOutbox sends the failed and dead-lettered rows among ids back to pending.
func (s *Store) RequeueOutbox(ctx context.Context, ids ...uuid.UUID) (events.Requeued, error) {
	out, err := s.admin.RequeueOutbox(ctx, ids...)
	return out, adminError("requeue outbox", err)
}

// RequeueOutboxStatus sends every row in status (failed or dead_letter) back to pending.
func (s *Store) RequeueOutboxStatus(ctx context.Context, status string) (events.Requeued, error) {
	out, err := s.admin.RequeueOutboxStatus(ctx, status)
	return out, adminError("requeue outbox", err)
}

// adminError turns the operator's mistakes into ErrInvalid (or a not-found) with the
// explanation, and the rest into the store's errors.
func adminError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, events.ErrInvalidStatus):
		return problem.Newf(wallet.ErrInvalid, "%s", err.Error())
	case errors.Is(err, events.ErrNotFound):
		return problem.Newf(wallet.ErrOutboxRowNotFound, "%s", err.Error())
	}
	return storeError(op, err)
}

// Verify checks the wallet's invariants on the data as it is: each transfer has exactly one
// outbox row and each outbox row its transfer, every balance is what its transfers add up to,
// every currency's balances sum to zero, and no balance is below its floor.
func (s *Store) Verify(ctx context.Context, opts wallet.VerifyOptions) ([]wallet.Check, error) {
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
			r, err := s.queries.VerifyTransfersHaveOutbox(ctx, walletdb.VerifyTransfersHaveOutboxParams{
				SampleSize: n, RetentionSeconds: opts.Retention.Seconds(),
			})
			return result(r), err
		}},
		{"every outbox row has its transfer", "outbox rows", func() (result, error) {
			r, err := s.queries.VerifyOutboxHasTransfers(ctx, n)
			return result(r), err
		}},
		{"every balance equals its transfers in minus out", "wallets", func() (result, error) {
			r, err := s.queries.VerifyBalancesMatchTransfers(ctx, n)
			return result(r), err
		}},
		{"balances sum to zero per currency", "currencies", func() (result, error) {
			r, err := s.queries.VerifyCurrencyTotalsZero(ctx, n)
			return result(r), err
		}},
		{"no balance below its floor", "wallets", func() (result, error) {
			r, err := s.queries.VerifyBalanceFloors(ctx, n)
			return result(r), err
		}},
	}
	out := make([]wallet.Check, 0, len(checks))
	for _, c := range checks {
		r, err := c.run()
		if err != nil {
			return nil, storeError(fmt.Sprintf("verify %q", c.name), err)
		}
		out = append(out, wallet.Check{Name: c.name, Unit: c.unit, Checked: r.Checked, Failed: r.Failed, Sample: r.Sample})
	}
	return out, nil
}
