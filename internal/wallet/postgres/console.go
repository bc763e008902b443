package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// ListRecentTransfers returns up to q.Limit transfers before the cursor, newest first: those
// whose event is at q.EventStatus, when set. A limit out of range is brought into
// 1..wallet.MaxListLimit (0 means wallet.DefaultListLimit); the page's Next is where the
// following (older) page starts. A cursor that names no transfer the actor may see is
// wallet.ErrInvalidCursor.
func (s *Store) ListRecentTransfers(ctx context.Context, q wallet.RecentQuery) (wallet.Page, error) {
	if err := q.Validate(); err != nil {
		return wallet.Page{}, err
	}
	owner := wallet.ActorOf(ctx).OwnerFilter()
	if err := s.checkTransferCursor(ctx, q.Before, owner); err != nil {
		return wallet.Page{}, err
	}
	limit := pageLimit(q.Limit)
	rows, err := s.recentTransferRows(ctx, q, owner, int32(limit+1)) // one more: is there a next page?
	if err != nil {
		return wallet.Page{}, fmt.Errorf("list recent transfers: %w", interpretError(err))
	}
	return transferPage(rows, limit, func(r walletdb.ListTransfersNewestRow) wallet.Transfer { return toTransfer(r.Transfer, r.OutboxStatus) }), nil
}

// recentTransferRows runs the newest-first query that fits q's event status, each bounded by
// its index.
func (s *Store) recentTransferRows(ctx context.Context, q wallet.RecentQuery, owner *string, rowLimit int32) ([]walletdb.ListTransfersNewestRow, error) {
	var before *time.Time
	var beforeID uuid.NullUUID
	if !q.Before.IsZero() {
		before, beforeID = &q.Before.CreatedAt, uuid.NullUUID{UUID: q.Before.ID, Valid: true}
	}
	switch q.EventStatus {
	case "":
		return s.queries.ListTransfersNewest(ctx, walletdb.ListTransfersNewestParams{
			BeforeCreatedAt: before, BeforeID: beforeID, Owner: owner, RowLimit: rowLimit,
		})
	case "acknowledged":
		rows, err := s.queries.ListTransfersNewestAcknowledged(ctx, walletdb.ListTransfersNewestAcknowledgedParams{
			BeforeCreatedAt: before, BeforeID: beforeID, Owner: owner, RowLimit: rowLimit,
		})
		return convertRows(rows, func(r walletdb.ListTransfersNewestAcknowledgedRow) walletdb.ListTransfersNewestRow {
			return walletdb.ListTransfersNewestRow(r)
		}), err
	}
	rows, err := s.queries.ListTransfersNewestByEventStatus(ctx, walletdb.ListTransfersNewestByEventStatusParams{
		Status: q.EventStatus, BeforeCreatedAt: before, BeforeID: beforeID, Owner: owner, RowLimit: rowLimit,
	})
	return convertRows(rows, func(r walletdb.ListTransfersNewestByEventStatusRow) walletdb.ListTransfersNewestRow {
		return walletdb.ListTransfersNewestRow(r)
	}), err
}

// GetBatchReversal returns the batch reversal with this id and its reversals; for an owner,
// one of a batch it may not see (GetBatch) is not found.
func (s *Store) GetBatchReversal(ctx context.Context, id uuid.UUID) (wallet.BatchReversal, error) {
	row, err := s.queries.GetBatchReversal(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.BatchReversal{}, problem.Newf(wallet.ErrBatchNotFound, "batch reversal %s does not exist", id)
	case err != nil:
		return wallet.BatchReversal{}, fmt.Errorf("get batch reversal %s: %w", id, err)
	}
	if owner := wallet.ActorOf(ctx).OwnerFilter(); owner != nil {
		_, err := s.queries.GetTransferBatch(ctx, walletdb.GetTransferBatchParams{ID: row.BatchReversal.BatchID, Owner: owner})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow):
			return wallet.BatchReversal{}, problem.Newf(wallet.ErrBatchNotFound, "batch reversal %s does not exist", id)
		case err != nil:
			return wallet.BatchReversal{}, fmt.Errorf("get batch of reversal %s: %w", id, err)
		}
	}
	r, err := batchReversalWithLegs(ctx, s.queries, row.BatchReversal, row.OutboxStatus)
	if err != nil {
		return wallet.BatchReversal{}, fmt.Errorf("get batch reversal %s: %w", id, interpretError(err))
	}
	return r, nil
}
