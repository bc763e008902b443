package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
	"walletgl/internal/metadata"
	"walletgl/internal/problem"
	"walletgl/internal/tracing"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// Holds, like reversals, do not go through the group commit: each change has a transaction of
// its own, which locks the hold's wallet (and a capture's receiver) first, by id as every
// writer does, then the hold's row. wallets.held moves in the same transaction as the hold's
// status, so the funds check of a hold or a transfer, made on the locked wallet row, always
// sees every pending hold.

// PlaceHold reserves Amount of a wallet and records the hold and its HoldPlaced event in one
// transaction, or returns the hold an earlier request with the same key placed.
func (s *Store) PlaceHold(ctx context.Context, req wallet.HoldRequest) (wallet.Hold, bool, error) {
	now := time.Now()
	if err := req.Validate(now); err != nil {
		return wallet.Hold{}, false, err
	}
	holdID, err := uuid.NewV7()
	if err != nil {
		return wallet.Hold{}, false, fmt.Errorf("generate hold id: %w", err)
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		return wallet.Hold{}, false, fmt.Errorf("generate event id: %w", err)
	}
	p := pendingHold{
		req: req, actor: wallet.ActorOf(ctx), hash: holdHash(req), expiresAt: req.Expiry(now),
		holdID: holdID, eventID: eventID, traceParent: tracing.TraceParent(ctx),
	}
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (holdResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (holdResult, error) { return s.writeHold(ctx, tx, p) })
	})
	err = s.keepRefusal(ctx, spaceHold, claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}, p.hash, err)
	if err != nil {
		return wallet.Hold{}, false, fmt.Errorf("place hold on %s: %w", req.WalletID, interpretError(err))
	}
	return r.hold, r.replayed, nil
}

// pendingHold is a validated hold request with the ids it will be written under, fixed before
// the first transaction so that a retried one writes the same hold and event.
type pendingHold struct {
	req             wallet.HoldRequest
	actor           wallet.Actor
	hash            []byte
	expiresAt       time.Time // fixed with the ids: a retry writes the same hold
	holdID, eventID uuid.UUID
	traceParent     string
}

// holdResult is a hold request's answer, and whether an earlier request made it.
type holdResult struct {
	hold     wallet.Hold
	replayed bool
}

func (s *Store) writeHold(ctx context.Context, tx pgx.Tx, p pendingHold) (holdResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req

	// (a) The wallet's row lock, the one every transfer takes: its balance and held stay as
	// read until commit.
	locked, err := q.LockWallets(ctx, []string{req.WalletID})
	if err != nil {
		return holdResult{}, fmt.Errorf("lock wallet: %w", err)
	}
	w := lockedWallets(locked)[req.WalletID]
	if w == nil {
		return holdResult{}, problem.Newf(wallet.ErrWalletNotFound, "wallet_id %q does not exist", req.WalletID)
	}
	if err := wallet.CheckDebit(p.actor, "wallet_id", w); err != nil {
		return holdResult{}, err
	}
	currency := req.Currency
	if currency == "" {
		currency = w.Currency
	}

	// (b) Claim the key: a replay answers before any rule is applied.
	key := claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}
	row, err := q.InsertHold(ctx, walletdb.InsertHoldParams{
		ID: p.holdID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		WalletID: req.WalletID, Amount: req.Amount, Currency: currency,
		ExpiresAt: p.expiresAt, PlacedEventID: p.eventID,
		CreatedByKey: uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
		Metadata:     req.Metadata.JSON(),
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return holdFromKey(ctx, q, key, p.hash)
	case err != nil:
		return holdResult{}, holdClaimError(req.IdempotencyKey, err)
	}
	if err := checkRefusal(ctx, q, spaceHold, key, p.hash); err != nil {
		return holdResult{}, err
	}

	// (c) The rules: the wallet's currency, and its available balance covers the amount. A
	// refusal is kept under the key once this transaction rolled back.
	if err := wallet.CheckHold(req.Amount, currency, *w); err != nil {
		return holdResult{}, refuse(err)
	}

	// (d) The wallet's held and the event, in the same transaction.
	if err := addToHeld(ctx, q, req.WalletID, req.Amount); err != nil {
		return holdResult{}, err
	}
	if _, err := s.outbox.Add(ctx, tx, holdPlaced(row, p.traceParent)); err != nil {
		return holdResult{}, err
	}
	return holdResult{hold: toHold(row, "")}, nil
}

// addToHeld changes a wallet's held by delta.
func addToHeld(ctx context.Context, q *walletdb.Queries, walletID string, delta int64) error {
	n, err := q.AddToHeld(ctx, walletdb.AddToHeldParams{ID: walletID, Delta: delta})
	if err != nil {
		return fmt.Errorf("update held of %s: %w", walletID, err)
	}
	if n != 1 {
		return fmt.Errorf("update held of %s: %d wallets changed, want 1", walletID, n)
	}
	return nil
}

// holdFromKey answers a hold request whose key another hold holds: a replay, or a refusal.
func holdFromKey(ctx context.Context, q *walletdb.Queries, k claimedKey, hash []byte) (holdResult, error) {
	key := k.key
	existing, err := q.GetHoldByIdempotencyKey(ctx, walletdb.GetHoldByIdempotencyKeyParams{IdempotencyOwner: k.owner, IdempotencyKey: k.key})
	if err != nil {
		return holdResult{}, fmt.Errorf("load hold by idempotency key: %w", err)
	}
	if string(existing.RequestHash) != string(hash) {
		return holdResult{}, problem.Newf(wallet.ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for hold %s, which differs from this request", key, existing.ID)
	}
	h, err := holdWithReceiver(ctx, q, existing)
	if err != nil {
		return holdResult{}, err
	}
	return holdResult{hold: h, replayed: true}, nil
}

// holdClaimError explains why the hold row could not be inserted.
func holdClaimError(key string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return problem.Newf(wallet.ErrIdempotencyKeyInFlight,
			"a request with Idempotency-Key %q is still being processed; retry later", key)
	}
	return fmt.Errorf("insert hold: %w", err)
}

// GetHold returns the hold with this id; for an owner, a hold on another's wallet is not found.
func (s *Store) GetHold(ctx context.Context, id uuid.UUID) (wallet.Hold, error) {
	row, err := s.queries.GetHold(ctx, walletdb.GetHoldParams{ID: id, Owner: wallet.ActorOf(ctx).OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.Hold{}, problem.Newf(wallet.ErrHoldNotFound, "hold %s does not exist", id)
	case err != nil:
		return wallet.Hold{}, fmt.Errorf("get hold %s: %w", id, err)
	}
	h, err := holdWithReceiver(ctx, s.queries, row)
	if err != nil {
		return wallet.Hold{}, fmt.Errorf("get hold %s: %w", id, interpretError(err))
	}
	return h, nil
}

// ListHolds returns up to q.Limit holds after the cursor, oldest first: those whose metadata
// hold every pair of q.Metadata, when set. A limit out of range is brought into
// 1..wallet.MaxListLimit (0 means wallet.DefaultListLimit). A cursor that names no hold the
// actor may see is wallet.ErrInvalidCursor.
func (s *Store) ListHolds(ctx context.Context, q wallet.HoldQuery) (wallet.HoldPage, error) {
	if err := q.Metadata.Validate(); err != nil {
		return wallet.HoldPage{}, err
	}
	limit := pageLimit(q.Limit)
	owner := wallet.ActorOf(ctx).OwnerFilter()
	after := q.After
	if !after.IsZero() {
		exists, err := s.queries.HoldCursorExists(ctx, walletdb.HoldCursorExistsParams{ID: after.ID, CreatedAt: after.CreatedAt, Owner: owner})
		if err != nil {
			return wallet.HoldPage{}, fmt.Errorf("look up cursor hold %s: %w", after.ID, interpretError(err))
		}
		if !exists {
			return wallet.HoldPage{}, problem.Newf(wallet.ErrInvalidCursor, "cursor %q names no hold of this listing", after.String())
		}
	}
	var rows []walletdb.ListHoldsRow
	var err error
	if len(q.Metadata) > 0 {
		var matched []walletdb.ListHoldsByMetadataRow
		matched, err = s.queries.ListHoldsByMetadata(ctx, walletdb.ListHoldsByMetadataParams{
			Metadata: q.Metadata.JSON(), AfterCreatedAt: after.CreatedAt, AfterID: after.ID, RowLimit: int32(limit + 1), Owner: owner,
		})
		rows = convertRows(matched, func(r walletdb.ListHoldsByMetadataRow) walletdb.ListHoldsRow { return walletdb.ListHoldsRow(r) })
	} else {
		rows, err = s.queries.ListHolds(ctx, walletdb.ListHoldsParams{
			AfterCreatedAt: after.CreatedAt, AfterID: after.ID, RowLimit: int32(limit + 1), // one more: is there a next page?
			Owner: owner,
		})
	}
	if err != nil {
		return wallet.HoldPage{}, fmt.Errorf("list holds: %w", interpretError(err))
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	page := wallet.HoldPage{Holds: make([]wallet.Hold, 0, len(rows))}
	for _, row := range rows {
		page.Holds = append(page.Holds, toHold(row.Hold, row.ToWalletID))
	}
	if more {
		page.Next = page.Holds[len(page.Holds)-1].Cursor()
	}
	return page, nil
}

// holdWithReceiver is row as a wallet.Hold, with its capture's receiver when it was captured.
func holdWithReceiver(ctx context.Context, q *walletdb.Queries, row walletdb.Hold) (wallet.Hold, error) {
	if !row.CaptureTransferID.Valid {
		return toHold(row, ""), nil
	}
	t, err := q.GetTransfer(ctx, row.CaptureTransferID.UUID)
	if err != nil {
		return wallet.Hold{}, fmt.Errorf("get capture transfer %s: %w", row.CaptureTransferID.UUID, err)
	}
	return toHold(row, t.ToWalletID), nil
}

// CaptureHold completes a pending hold: in one transaction the hold is captured, its whole
// amount released from the wallet's held, the captured amount moved to the receiver as a
// transfer with its TransferCompleted event, and the HoldCaptured event written. A capture
// replayed with its Idempotency-Key returns the hold as it is now.
func (s *Store) CaptureHold(ctx context.Context, req wallet.CaptureRequest) (wallet.Hold, bool, error) {
	if err := req.Validate(); err != nil {
		return wallet.Hold{}, false, err
	}
	p, err := newPendingCapture(req, wallet.ActorOf(ctx))
	if err != nil {
		return wallet.Hold{}, false, err
	}
	// The commit span and the traceparent both outbox rows store, as a transfer's.
	span := &pendingTransfer{transferID: p.transferID, eventID: p.transferEventID}
	ctx = s.startCommit(ctx, span)
	p.traceParent = span.traceParent
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (holdResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (holdResult, error) { return s.writeCapture(ctx, tx, p) })
	})
	err = s.keepRefusal(ctx, spaceTransfer, claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}, p.hash, err)
	span.endCommit(transferResult{replayed: r.replayed}, err)
	if err != nil {
		return wallet.Hold{}, false, fmt.Errorf("capture hold %s: %w", req.HoldID, interpretError(err))
	}
	return r.hold, r.replayed, nil
}

// pendingCapture is a validated capture with the ids of its transfer and both events.
type pendingCapture struct {
	req                                    wallet.CaptureRequest
	actor                                  wallet.Actor
	hash                                   []byte
	transferID, transferEventID, holdEvent uuid.UUID
	traceParent                            string
}

func newPendingCapture(req wallet.CaptureRequest, actor wallet.Actor) (pendingCapture, error) {
	p := pendingCapture{req: req, actor: actor, hash: captureHash(req)}
	for _, id := range []*uuid.UUID{&p.transferID, &p.transferEventID, &p.holdEvent} {
		v, err := uuid.NewV7()
		if err != nil {
			return pendingCapture{}, fmt.Errorf("generate capture ids: %w", err)
		}
		*id = v
	}
	return p, nil
}

func (s *Store) writeCapture(ctx context.Context, tx pgx.Tx, p pendingCapture) (holdResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req

	// (a) The hold's wallet, amount and currency never change: read them unlocked. Another
	// owner's hold is not found.
	hold, err := getHold(ctx, q, req.HoldID, p.actor)
	if err != nil {
		return holdResult{}, err
	}
	if hold.WalletID == req.ToWalletID {
		return holdResult{}, problem.Newf(wallet.ErrSameWallet, "hold %s is on wallet %q; it cannot be captured to it", hold.ID, hold.WalletID)
	}

	// (b) Both wallets in id order, then the hold's row, which serialises its capture and void.
	locked, err := q.LockWallets(ctx, []string{hold.WalletID, req.ToWalletID})
	if err != nil {
		return holdResult{}, fmt.Errorf("lock wallets: %w", err)
	}
	hold, err = q.LockHold(ctx, req.HoldID)
	if err != nil {
		return holdResult{}, fmt.Errorf("lock hold: %w", interpretError(err))
	}

	// (c) A key already used answers before any rule: a replay of this capture, or a refusal.
	if r, used, err := captureFromKey(ctx, q, p); used || err != nil {
		return r, err
	}

	// (d) The rules: the hold's wallet may be debited by the actor, the hold is pending and not
	// expired, the capture within it, and the transfer passes a transfer's rules once the
	// hold's amount is released.
	amount := req.Amount
	if amount == 0 {
		amount = hold.Amount
	}
	h := toHold(hold, "")
	move := wallet.CaptureMove(req, h, amount)
	wallets := lockedWallets(locked)
	from, to := wallets[hold.WalletID], wallets[req.ToWalletID]
	if err := wallet.CheckDebit(p.actor, "wallet_id", from); err != nil {
		return holdResult{}, err
	}
	refusal := wallet.CheckCapture(h, amount, time.Now())
	if refusal == nil {
		refusal = wallet.CheckTransfer(move, wallet.Released(from, h), to)
	}
	if refusal != nil && !wallet.Kept(refusal) {
		return holdResult{}, refusal
	}

	// (e) Claim the key with the transfer row; a concurrent request with it waits here. A
	// refused capture claims it too (a replay answers first), then rolls back and is kept.
	row, err := q.InsertCaptureTransfer(ctx, walletdb.InsertCaptureTransferParams{
		ID: p.transferID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		FromWalletID: move.FromWalletID, ToWalletID: move.ToWalletID, Amount: amount,
		Currency: hold.Currency, EventID: p.transferEventID,
		CreatedByKey: uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
		HoldID:       uuid.NullUUID{UUID: hold.ID, Valid: true},
		Metadata:     hold.Metadata, // the hold's: a filter finds the capture with its hold
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		if r, used, err := captureFromKey(ctx, q, p); used || err != nil {
			return r, err
		}
		return holdResult{}, fmt.Errorf("idempotency key %q conflicted but holds no transfer", req.IdempotencyKey)
	case err != nil:
		return holdResult{}, claimError(move, err)
	}
	key := claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}
	if err := checkRefusal(ctx, q, spaceTransfer, key, p.hash); err != nil {
		return holdResult{}, err
	}
	if refusal != nil {
		return holdResult{}, refuse(refusal)
	}

	// (f) Release the whole hold, move the captured amount, finish the hold, write both events.
	if err := addToHeld(ctx, q, hold.WalletID, -hold.Amount); err != nil {
		return holdResult{}, err
	}
	n, err := q.AddToBalances(ctx, walletdb.AddToBalancesParams{
		Ids: []string{move.FromWalletID, move.ToWalletID}, Deltas: []int64{-amount, amount},
	})
	if err != nil {
		return holdResult{}, fmt.Errorf("update balances: %w", err)
	}
	if n != 2 {
		return holdResult{}, fmt.Errorf("update balances: %d wallets changed, want 2", n)
	}
	captured, err := q.CaptureHold(ctx, walletdb.CaptureHoldParams{
		ID: hold.ID, CapturedAmount: &amount,
		CaptureTransferID: uuid.NullUUID{UUID: row.ID, Valid: true},
		FinishedEventID:   uuid.NullUUID{UUID: p.holdEvent, Valid: true},
	})
	if err != nil {
		return holdResult{}, fmt.Errorf("capture hold: %w", err)
	}
	if _, err := s.outbox.AddBatch(ctx, tx, []outbox.Event{
		transferCompleted(row, p.traceParent, wallet.TransferKind(from, to), s.eventType),
		holdCaptured(captured, row, p.traceParent),
	}); err != nil {
		return holdResult{}, err
	}
	return holdResult{hold: toHold(captured, row.ToWalletID)}, nil
}

// getHold reads a hold without a lock, naming one that does not exist.
func getHold(ctx context.Context, q *walletdb.Queries, id uuid.UUID, actor wallet.Actor) (walletdb.Hold, error) {
	hold, err := q.GetHold(ctx, walletdb.GetHoldParams{ID: id, Owner: actor.OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return walletdb.Hold{}, problem.Newf(wallet.ErrHoldNotFound, "hold %s does not exist", id)
	case err != nil:
		return walletdb.Hold{}, fmt.Errorf("get hold: %w", err)
	}
	return hold, nil
}

// captureFromKey answers a capture whose key a transfer holds (used): the same capture of the
// same hold replays it, anything else is refused. A key no transfer holds is not used.
func captureFromKey(ctx context.Context, q *walletdb.Queries, p pendingCapture) (holdResult, bool, error) {
	existing, err := q.GetTransferByIdempotencyKey(ctx, walletdb.GetTransferByIdempotencyKeyParams{
		IdempotencyOwner: p.actor.Owner, IdempotencyKey: p.req.IdempotencyKey,
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return holdResult{}, false, nil
	case err != nil:
		return holdResult{}, true, fmt.Errorf("load transfer by idempotency key: %w", err)
	}
	t := existing.Transfer
	if string(t.RequestHash) != string(p.hash) || t.HoldID.UUID != p.req.HoldID {
		return holdResult{}, true, problem.Newf(wallet.ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for transfer %s, which differs from this capture", p.req.IdempotencyKey, t.ID)
	}
	hold, err := q.GetHold(ctx, walletdb.GetHoldParams{ID: p.req.HoldID})
	if err != nil {
		return holdResult{}, true, fmt.Errorf("get captured hold: %w", err)
	}
	return holdResult{hold: toHold(hold, t.ToWalletID), replayed: true}, true, nil
}

// VoidHold releases a pending hold with the reason requested (expired when its expiry has
// passed and the worker has not voided it yet). A hold already voided is returned as it is,
// without a new event: a repeated void is idempotent. A captured hold is not pending.
func (s *Store) VoidHold(ctx context.Context, id uuid.UUID) (wallet.Hold, error) {
	eventID, err := uuid.NewV7()
	if err != nil {
		return wallet.Hold{}, fmt.Errorf("generate event id: %w", err)
	}
	traceParent := tracing.TraceParent(ctx)
	h, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (wallet.Hold, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (wallet.Hold, error) {
			q := s.queries.WithTx(tx)
			hold, err := getHold(ctx, q, id, wallet.ActorOf(ctx))
			if err != nil {
				return wallet.Hold{}, err
			}
			if _, err := q.LockWallets(ctx, []string{hold.WalletID}); err != nil {
				return wallet.Hold{}, fmt.Errorf("lock wallet: %w", err)
			}
			if hold, err = q.LockHold(ctx, id); err != nil {
				return wallet.Hold{}, fmt.Errorf("lock hold: %w", interpretError(err))
			}
			switch hold.Status {
			case wallet.HoldVoided:
				return toHold(hold, ""), nil
			case wallet.HoldCaptured:
				return wallet.Hold{}, problem.Newf(wallet.ErrHoldNotPending, "hold %s is captured", id)
			}
			reason := wallet.VoidRequested
			if toHold(hold, "").Expired(time.Now()) {
				reason = wallet.VoidExpired
			}
			return s.voidLocked(ctx, tx, hold, reason, eventID, traceParent)
		})
	})
	if err != nil {
		return wallet.Hold{}, fmt.Errorf("void hold %s: %w", id, interpretError(err))
	}
	return h, nil
}

// voidLocked voids a pending hold whose wallet and row tx has locked: its status, the wallet's
// held and its HoldVoided event.
func (s *Store) voidLocked(ctx context.Context, tx pgx.Tx, hold walletdb.Hold, reason string, eventID uuid.UUID, traceParent string) (wallet.Hold, error) {
	q := s.queries.WithTx(tx)
	if err := addToHeld(ctx, q, hold.WalletID, -hold.Amount); err != nil {
		return wallet.Hold{}, err
	}
	voided, err := q.VoidHold(ctx, walletdb.VoidHoldParams{
		ID: hold.ID, VoidReason: &reason, FinishedEventID: uuid.NullUUID{UUID: eventID, Valid: true},
	})
	if err != nil {
		return wallet.Hold{}, fmt.Errorf("void hold: %w", err)
	}
	if _, err := s.outbox.Add(ctx, tx, holdVoided(voided, traceParent)); err != nil {
		return wallet.Hold{}, err
	}
	return toHold(voided, ""), nil
}

// ExpireHolds voids, with the reason expired, up to limit pending holds whose expiry has
// passed, in one transaction: their wallets are locked first (by id), then the holds, skipping
// any another transaction holds. It returns how many it voided.
func (s *Store) ExpireHolds(ctx context.Context, limit int) (int, error) {
	candidates, err := s.queries.ExpiredHolds(ctx, int32(limit))
	if err != nil {
		return 0, fmt.Errorf("find expired holds: %w", interpretError(err))
	}
	if len(candidates) == 0 {
		return 0, nil
	}
	ids := make([]uuid.UUID, len(candidates))
	walletIDs := make([]string, len(candidates))
	eventIDs := make(map[uuid.UUID]uuid.UUID, len(candidates)) // fixed before any retry
	for i, c := range candidates {
		ids[i], walletIDs[i] = c.ID, c.WalletID
		if eventIDs[c.ID], err = uuid.NewV7(); err != nil {
			return 0, fmt.Errorf("generate event id: %w", err)
		}
	}
	n, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (int, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (int, error) {
			q := s.queries.WithTx(tx)
			if _, err := q.LockWallets(ctx, walletIDs); err != nil {
				return 0, fmt.Errorf("lock wallets: %w", err)
			}
			holds, err := q.LockExpiredHolds(ctx, ids)
			if err != nil {
				return 0, fmt.Errorf("lock expired holds: %w", err)
			}
			for _, hold := range holds {
				if _, err := s.voidLocked(ctx, tx, hold, wallet.VoidExpired, eventIDs[hold.ID], ""); err != nil {
					return 0, err
				}
			}
			return len(holds), nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("expire holds: %w", interpretError(err))
	}
	return n, nil
}

// holdPlaced is the event of a hold just placed.
func holdPlaced(row walletdb.Hold, traceParent string) outbox.Event {
	return outbox.Event{
		TraceParent: traceParent, ID: row.PlacedEventID, Type: contract.TypeHoldPlaced,
		AggregateID: row.ID.String(), Time: row.CreatedAt,
		Data: contract.HoldPlaced{
			HoldID: row.ID.String(), WalletID: row.WalletID, Amount: row.Amount, Currency: row.Currency,
			ExpiresAt: row.ExpiresAt.UTC(), Metadata: mustMetadata(row.Metadata), CreatedAt: row.CreatedAt.UTC(),
		},
	}
}

// holdCaptured is the event of a hold just captured as transfer t.
func holdCaptured(row walletdb.Hold, t walletdb.Transfer, traceParent string) outbox.Event {
	return outbox.Event{
		TraceParent: traceParent, ID: row.FinishedEventID.UUID, Type: contract.TypeHoldCaptured,
		AggregateID: row.ID.String(), Time: *row.FinishedAt,
		Data: contract.HoldCaptured{
			HoldID: row.ID.String(), TransferID: t.ID.String(), WalletID: row.WalletID, ToWalletID: t.ToWalletID,
			Amount: row.Amount, CapturedAmount: t.Amount, Currency: row.Currency, CreatedAt: row.FinishedAt.UTC(),
		},
	}
}

// holdVoided is the event of a hold just voided.
func holdVoided(row walletdb.Hold, traceParent string) outbox.Event {
	return outbox.Event{
		TraceParent: traceParent, ID: row.FinishedEventID.UUID, Type: contract.TypeHoldVoided,
		AggregateID: row.ID.String(), Time: *row.FinishedAt,
		Data: contract.HoldVoided{
			HoldID: row.ID.String(), WalletID: row.WalletID, Amount: row.Amount, Currency: row.Currency,
			Reason: *row.VoidReason, CreatedAt: row.FinishedAt.UTC(),
		},
	}
}

func toHold(row walletdb.Hold, toWalletID string) wallet.Hold {
	h := wallet.Hold{
		ID: row.ID, IdempotencyKey: row.IdempotencyKey, WalletID: row.WalletID,
		Amount: row.Amount, Currency: row.Currency, Status: row.Status,
		ExpiresAt: row.ExpiresAt.UTC(), CaptureTransferID: row.CaptureTransferID.UUID,
		ToWalletID: toWalletID, Metadata: mustMetadata(row.Metadata), CreatedAt: row.CreatedAt.UTC(),
		PlacedEventID: row.PlacedEventID, FinishedEventID: row.FinishedEventID.UUID,
	}
	if row.VoidReason != nil {
		h.VoidReason = *row.VoidReason
	}
	if row.CapturedAmount != nil {
		h.CapturedAmount = *row.CapturedAmount
	}
	if row.FinishedAt != nil {
		h.FinishedAt = row.FinishedAt.UTC()
	}
	return h
}

// holdHash fingerprints a hold request as asked (an expires_in, not the time it came to), under
// its own tag: a key used for a hold never replays as anything else.
func holdHash(req wallet.HoldRequest) []byte {
	expiresAt := ""
	if !req.ExpiresAt.IsZero() {
		expiresAt = req.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	fields := []string{"hold.v1", req.WalletID, strconv.FormatInt(req.Amount, 10), req.Currency, expiresAt, req.ExpiresIn.String()}
	return fingerprint(append(fields, metadataFields(req.Metadata)...)...)
}

// metadataFields are m's part of a request's fingerprint: none when m is empty, so a request
// without metadata hashes as before metadata existed.
func metadataFields(m metadata.Metadata) []string {
	if len(m) == 0 {
		return nil
	}
	return append([]string{"metadata", strconv.Itoa(len(m))}, m.Fields()...)
}

// captureHash fingerprints a capture as requested (amount 0: the whole hold), under a tag of
// its own: a key used for a transfer or a reversal never replays as a capture.
func captureHash(req wallet.CaptureRequest) []byte {
	return fingerprint("capture.v1", req.HoldID.String(), req.ToWalletID, strconv.FormatInt(req.Amount, 10))
}

// fingerprint hashes length-prefixed fields, as requestHash does.
func fingerprint(fields ...string) []byte {
	h := sha256.New()
	for _, field := range fields {
		fmt.Fprintf(h, "%d:%s;", len(field), field)
	}
	return h.Sum(nil)
}
