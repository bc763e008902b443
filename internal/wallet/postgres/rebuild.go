package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// RebuildEvents publishes again the events of the wallet's movements in a period, re-created
// from its tables, which keep every transfer, reversal and hold for good while retention
// deletes acknowledged outbox rows: the source of a GL rebuilt from scratch once the stream
// and the outbox have forgotten. Every event has the id, type, subject, time and data it was
// first written with (the transfer event's version excepted: req.EventType), so a consumer's
// inbox that holds it already recognises it. Outbox.Restore decides per row: re-created
// pending when retention deleted it, back to pending when acknowledged, left alone otherwise.
//
// The events go in event id order, which is the order the relay claims pending rows in, a
// batch per transaction: a reversal's event, and a hold's capture or void, is made after its
// original's commit, so its id (UUIDv7) follows the original's and is published after it.
// It is safe beside a running wallet: a movement made meanwhile has its own row.
func (s *Store) RebuildEvents(ctx context.Context, req wallet.RebuildRequest) (wallet.Rebuilt, error) {
	out := wallet.Rebuilt{Since: req.Since.UTC(), ByType: map[string]int64{}}
	if req.BatchSize == 0 {
		req.BatchSize = wallet.DefaultRebuildBatchSize
	}
	var until *time.Time
	switch {
	case req.Since.IsZero():
		return out, errors.New("rebuild events: the period needs a start")
	case !req.Until.IsZero() && !req.Until.After(req.Since):
		return out, fmt.Errorf("rebuild events: the end of the period (%s) must be after its start (%s)",
			req.Until.Format(time.RFC3339Nano), req.Since.Format(time.RFC3339Nano))
	case req.BatchSize < 1 || req.BatchSize > wallet.MaxRebuildBatchSize:
		return out, fmt.Errorf("rebuild events: the batch size must be from 1 to %d, got %d", wallet.MaxRebuildBatchSize, req.BatchSize)
	case req.EventType != contract.TypeTransferCompleted && req.EventType != contract.TypeTransferCompletedV2:
		return out, fmt.Errorf("rebuild events: the transfer event type must be %s or %s, got %q",
			contract.TypeTransferCompleted, contract.TypeTransferCompletedV2, req.EventType)
	case !req.Until.IsZero():
		u := req.Until.UTC()
		out.Until, until = &u, &u
	}
	after := uuid.Nil
	for {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("rebuild events: stopped after %d events: %w", out.Events, err)
		}
		// An operator's command, run again if it fails (what it wrote stays, and is left
		// alone the next time): no retry.
		type batch struct {
			evs      []outbox.Event
			restored outbox.Restored
		}
		b, err := database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (batch, error) {
			evs, err := rebuildBatch(ctx, walletdb.New(tx), after, req.Since, until, req.BatchSize, req.EventType)
			if err != nil {
				return batch{}, err
			}
			restored, err := s.outbox.Restore(ctx, tx, evs)
			return batch{evs, restored}, err
		})
		evs, restored := b.evs, b.restored
		if err != nil {
			return out, fmt.Errorf("rebuild events: stopped after %d events: %w", out.Events, interpretError(err))
		}
		if len(evs) == 0 {
			return out, nil
		}
		out.Batches++
		out.Events += int64(len(evs))
		out.Created += restored.Created
		out.Republished += restored.Republished
		out.Left += restored.Left
		for _, ev := range evs {
			out.ByType[ev.Type]++
		}
		if len(evs) < req.BatchSize {
			return out, nil
		}
		after = evs[len(evs)-1].ID
	}
}

// rebuildBatch re-creates the next n events of the period after the event id after, in id
// order: up to n of each kind of movement, merged, the first n kept.
func rebuildBatch(ctx context.Context, q *walletdb.Queries, after uuid.UUID, since time.Time, until *time.Time, n int, eventType string) ([]outbox.Event, error) {
	limit := int32(n)
	transfers, err := q.RebuildTransfers(ctx, walletdb.RebuildTransfersParams{AfterEventID: after, Since: since, Until: until, RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("read transfers: %w", err)
	}
	placed, err := q.RebuildHoldsPlaced(ctx, walletdb.RebuildHoldsPlacedParams{AfterEventID: after, Since: since, Until: until, RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("read holds placed: %w", err)
	}
	finished, err := q.RebuildHoldsFinished(ctx, walletdb.RebuildHoldsFinishedParams{AfterEventID: after, Since: since, Until: until, RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("read holds finished: %w", err)
	}
	batches, err := rebuildBatches(ctx, q, after, since, until, limit)
	if err != nil {
		return nil, err
	}
	evs := make([]outbox.Event, 0, len(transfers)+len(placed)+len(finished)+len(batches))
	evs = append(evs, batches...)
	for _, r := range transfers {
		if r.Transfer.ReversesTransferID.Valid {
			evs = append(evs, transferReversed(r.Transfer, ""))
			continue
		}
		evs = append(evs, transferCompleted(r.Transfer, "", contract.TransferKind(r.FromAllowNegative, r.ToAllowNegative), eventType))
	}
	for _, h := range placed {
		evs = append(evs, holdPlaced(h, ""))
	}
	for _, r := range finished {
		switch r.Hold.Status {
		case wallet.HoldCaptured:
			capture := walletdb.Transfer{ID: r.Hold.CaptureTransferID.UUID, ToWalletID: r.ToWalletID, Amount: r.TransferAmount}
			evs = append(evs, holdCaptured(r.Hold, capture, ""))
		case wallet.HoldVoided:
			evs = append(evs, holdVoided(r.Hold, ""))
		default:
			return nil, fmt.Errorf("hold %s is %s with a finishing event %s", r.Hold.ID, r.Hold.Status, r.Hold.FinishedEventID.UUID)
		}
	}
	slices.SortFunc(evs, func(a, b outbox.Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return evs[:min(len(evs), n)], nil
}

// rebuildBatches re-creates the next n events of batches and batch reversals of the period
// after the event id after: each is one event, with its legs.
func rebuildBatches(ctx context.Context, q *walletdb.Queries, after uuid.UUID, since time.Time, until *time.Time, n int32) ([]outbox.Event, error) {
	batches, err := q.RebuildBatches(ctx, walletdb.RebuildBatchesParams{AfterEventID: after, Since: since, Until: until, RowLimit: n})
	if err != nil {
		return nil, fmt.Errorf("read transfer batches: %w", err)
	}
	reversals, err := q.RebuildBatchReversals(ctx, walletdb.RebuildBatchReversalsParams{AfterEventID: after, Since: since, Until: until, RowLimit: n})
	if err != nil {
		return nil, fmt.Errorf("read batch reversals: %w", err)
	}
	evs := make([]outbox.Event, 0, len(batches)+len(reversals))
	if len(batches) > 0 {
		ids := make([]uuid.UUID, len(batches))
		for i, b := range batches {
			ids[i] = b.ID
		}
		rows, err := q.RebuildBatchLegs(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("read batch legs: %w", err)
		}
		legs := map[uuid.UUID][]walletdb.Transfer{}
		kinds := map[uuid.UUID][]string{}
		for _, r := range rows {
			id := r.Transfer.BatchID.UUID
			legs[id] = append(legs[id], r.Transfer)
			kinds[id] = append(kinds[id], contract.TransferKind(r.FromAllowNegative, r.ToAllowNegative))
		}
		for _, b := range batches {
			evs = append(evs, batchCompleted(b, legs[b.ID], kinds[b.ID], ""))
		}
	}
	if len(reversals) > 0 {
		ids := make([]uuid.UUID, len(reversals))
		for i, r := range reversals {
			ids[i] = r.ID
		}
		rows, err := q.RebuildBatchReversalLegs(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("read batch reversal legs: %w", err)
		}
		legs := map[uuid.UUID][]walletdb.Transfer{}
		for _, t := range rows {
			legs[t.BatchReversalID.UUID] = append(legs[t.BatchReversalID.UUID], t)
		}
		for _, r := range reversals {
			evs = append(evs, batchReversed(r, legs[r.ID], ""))
		}
	}
	return evs, nil
}
