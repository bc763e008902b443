package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// Reversals do not go through the group commit: they are rare next to transfers, and each
// locks its original transfer's row, which a batch of unrelated transfers has no reason to
// wait for. Each has a transaction of its own, which takes its locks in the order every writer
// of transfers takes them (wallets by id, then the key, through the unique index), plus the
// original's row after the wallets.

// ReverseTransfer moves Amount of a completed transfer back, from the wallet that received it
// to the one that sent it, and records the reversal and its TransferReversed event, all in one
// transaction; or returns the reversal an earlier request with the same key created.
func (s *Store) ReverseTransfer(ctx context.Context, req wallet.ReversalRequest) (wallet.Transfer, bool, error) {
	if err := req.Validate(); err != nil {
		return wallet.Transfer{}, false, err
	}
	if req.Force && s.audit == nil {
		return wallet.Transfer{}, false, fmt.Errorf("reverse transfer %s by force: %w", req.TransferID, errUnaudited)
	}
	reversalID, err := uuid.NewV7()
	if err != nil {
		return wallet.Transfer{}, false, fmt.Errorf("generate reversal id: %w", err)
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		return wallet.Transfer{}, false, fmt.Errorf("generate event id: %w", err)
	}
	p := pendingReversal{req: req, actor: wallet.ActorOf(ctx), hash: reversalHash(req), reversalID: reversalID, eventID: eventID}
	// The commit span and the traceparent the outbox row stores, as a transfer's.
	span := &pendingTransfer{transferID: reversalID, eventID: eventID}
	ctx = s.startCommit(ctx, span)
	p.traceParent = span.traceParent
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (transferResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (transferResult, error) { return s.writeReversal(ctx, tx, p) })
	})
	err = s.keepRefusal(ctx, spaceTransfer, claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}, p.hash, err)
	span.endCommit(r, err)
	if err != nil {
		return wallet.Transfer{}, false, fmt.Errorf("reverse transfer %s: %w", req.TransferID, interpretError(err))
	}
	return r.transfer, r.replayed, nil
}

// pendingReversal is a validated reversal request with the ids it will be written under, fixed
// before the first transaction as a transfer's are.
type pendingReversal struct {
	req                 wallet.ReversalRequest
	actor               wallet.Actor
	hash                []byte
	reversalID, eventID uuid.UUID
	traceParent         string
}

func (s *Store) writeReversal(ctx context.Context, tx pgx.Tx, p pendingReversal) (transferResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req

	// (a) The original's wallets, amount and currency never change: read them unlocked.
	orig, err := q.GetTransfer(ctx, req.TransferID)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return transferResult{}, problem.Newf(wallet.ErrTransferNotFound, "transfer %s does not exist", req.TransferID)
	case err != nil:
		return transferResult{}, fmt.Errorf("get transfer: %w", err)
	}
	move := wallet.ReversalMove(req, toTransfer(orig, ""))

	// (b) The wallets, in id order as every writer locks them, then the original's row, which
	// serialises the reversals of one transfer.
	locked, err := q.LockWallets(ctx, []string{move.FromWalletID, move.ToWalletID})
	if err != nil {
		return transferResult{}, fmt.Errorf("lock wallets: %w", err)
	}
	orig, err = q.LockTransferForReversal(ctx, req.TransferID)
	if err != nil {
		return transferResult{}, fmt.Errorf("lock transfer: %w", interpretError(err))
	}
	wallets := lockedWallets(locked)
	if err := checkReverser(p.actor, orig, wallets[move.FromWalletID], wallets[move.ToWalletID]); err != nil {
		return transferResult{}, err
	}
	if orig.BatchID.Valid {
		return transferResult{}, problem.Newf(wallet.ErrTransferInBatch,
			"transfer %s is a leg of batch %s: reverse it with its batch, POST /v1/transfer-batches/%s/reversals", orig.ID, orig.BatchID.UUID, orig.BatchID.UUID)
	}
	// The rest is what is left under the original's lock. Nothing left claims no key: the
	// key's earlier answer, a refusal kept under it, or the refusal, kept in turn.
	req, err = wallet.ResolveReversal(req, toTransfer(orig, ""))
	if err != nil {
		return s.answerNothingLeft(ctx, q, p, err)
	}
	move = wallet.ReversalMove(req, toTransfer(orig, ""))

	// (c) The rules, before the key is claimed: the forced flag and the audit depend on them.
	// A reversal is not reversed, the reversals stay within the original, the receiver keeps
	// its minimum (a forced reversal may take it below, by at most its amount) and the sender
	// its maximum. A refusal is kept under the key once this transaction rolled back, unless
	// the key already holds an answer (a replay answers before any rule).
	refusal := wallet.CheckReversal(req, toTransfer(orig, ""))
	var shortfall int64
	if refusal == nil {
		if req.Force {
			shortfall, refusal = wallet.CheckForcedReversal(move, wallets[move.FromWalletID], wallets[move.ToWalletID])
		} else {
			refusal = wallet.CheckTransfer(move, wallets[move.FromWalletID], wallets[move.ToWalletID])
		}
	}

	// (d) Claim the key: a replay answers with the key's earlier answer.
	row, err := q.InsertReversal(ctx, walletdb.InsertReversalParams{
		ID: p.reversalID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		FromWalletID: move.FromWalletID, ToWalletID: move.ToWalletID,
		Amount: req.Amount, Currency: orig.Currency, EventID: p.eventID,
		CreatedByKey:       uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
		ReversesTransferID: uuid.NullUUID{UUID: orig.ID, Valid: true},
		Forced:             shortfall > 0,
		Metadata:           req.Metadata.JSON(),
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return answerFromKey(ctx, q, &pendingTransfer{req: move, actor: p.actor, hash: p.hash})
	case err != nil:
		return transferResult{}, claimError(move, err)
	}
	key := claimedKey{owner: p.actor.Owner, key: req.IdempotencyKey}
	if err := checkRefusal(ctx, q, spaceTransfer, key, p.hash); err != nil {
		return transferResult{}, err
	}
	if refusal != nil {
		return transferResult{}, refuse(refusal)
	}
	if shortfall > 0 {
		if err := s.forceBelowMinimum(ctx, tx, q, row, shortfall); err != nil {
			return transferResult{}, err
		}
	}

	// (e) The running total, which the database keeps within the amount (its CHECK), then both
	// balances and the event, in the same transaction.
	if _, err := q.AddReversedAmount(ctx, walletdb.AddReversedAmountParams{ID: orig.ID, Amount: req.Amount}); err != nil {
		return transferResult{}, reversedAmountError(orig, req, err)
	}
	n, err := q.AddToBalances(ctx, walletdb.AddToBalancesParams{
		Ids:    []string{move.FromWalletID, move.ToWalletID},
		Deltas: []int64{-req.Amount, req.Amount},
	})
	if err != nil {
		return transferResult{}, fmt.Errorf("update balances: %w", err)
	}
	if n != 2 {
		return transferResult{}, fmt.Errorf("update balances: %d wallets changed, want 2", n)
	}
	status, err := s.outbox.Add(ctx, tx, transferReversed(row, p.traceParent))
	if err != nil {
		return transferResult{}, err
	}
	return transferResult{transfer: toTransfer(row, status)}, nil
}

// forceBelowMinimum records that reversal row takes its from-wallet shortfall below its
// minimum: the wallet's allowance below it (forced_debit) and the audit trail, in tx.
func (s *Store) forceBelowMinimum(ctx context.Context, tx pgx.Tx, q *walletdb.Queries, row walletdb.Transfer, shortfall int64) error {
	n, err := q.AddForcedDebit(ctx, walletdb.AddForcedDebitParams{ID: row.FromWalletID, Amount: shortfall})
	if err != nil {
		return fmt.Errorf("add forced debit: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("add forced debit: %d wallets changed, want 1", n)
	}
	detail := struct {
		TransferID   string `json:"transfer_id"`
		WalletID     string `json:"wallet_id"`
		Amount       int64  `json:"amount"`
		Currency     string `json:"currency"`
		BelowMinimum int64  `json:"below_minimum"`
	}{row.ReversesTransferID.UUID.String(), row.FromWalletID, row.Amount, row.Currency, shortfall}
	return s.audit(ctx, tx, ActionForcedReversal, row.ID.String(), detail)
}

// answerNothingLeft answers a reversal of the rest of a transfer reversed in full: the
// reversal its key made before (a replay), a refusal kept under its key, or refused (a
// refusal kept under the key once the transaction rolled back).
func (s *Store) answerNothingLeft(ctx context.Context, q *walletdb.Queries, p pendingReversal, refusal error) (transferResult, error) {
	_, err := q.GetTransferByIdempotencyKey(ctx, walletdb.GetTransferByIdempotencyKeyParams{
		IdempotencyOwner: p.actor.Owner, IdempotencyKey: p.req.IdempotencyKey,
	})
	switch err := interpretError(err); {
	case err == nil:
		return answerFromKey(ctx, q, &pendingTransfer{req: wallet.TransferRequest{IdempotencyKey: p.req.IdempotencyKey}, actor: p.actor, hash: p.hash})
	case !errors.Is(err, errNoRow):
		return transferResult{}, fmt.Errorf("load transfer by idempotency key: %w", err)
	}
	if err := checkRefusal(ctx, q, spaceTransfer, claimedKey{owner: p.actor.Owner, key: p.req.IdempotencyKey}, p.hash); err != nil {
		return transferResult{}, err
	}
	return transferResult{}, refuse(refusal)
}

// checkReverser applies the actor's rights to a reversal of orig, which takes the money back
// from its receiver (from) to its sender (to): an owner who can see neither wallet does not
// find the transfer; one who sent it but did not receive it may not reverse it; the receiver's
// wallet is debited as any (wallet.CheckDebit).
func checkReverser(a wallet.Actor, orig walletdb.Transfer, from, to *wallet.Wallet) error {
	sees := func(w *wallet.Wallet) bool { return w != nil && a.Reads(w.Owner) }
	switch {
	case !sees(from) && !sees(to):
		return problem.Newf(wallet.ErrTransferNotFound, "transfer %s does not exist", orig.ID)
	case !sees(from):
		return problem.Newf(wallet.ErrForbidden, "transfer %s can be reversed only by the owner of the wallet that received it", orig.ID)
	}
	return wallet.CheckDebit(a, "to_wallet_id", from)
}

// reversedAmountError names the database's refusal of a running total beyond the amount.
func reversedAmountError(orig walletdb.Transfer, req wallet.ReversalRequest, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "transfers_reversed_within_amount" {
		return problem.Newf(wallet.ErrReversalExceedsTransfer,
			"transfer %s of %d %s cannot be reversed by %d more", orig.ID, orig.Amount, orig.Currency, req.Amount)
	}
	return fmt.Errorf("add reversed amount: %w", err)
}

// transferReversed is the event of a reversal just written, in the trace of traceParent.
func transferReversed(row walletdb.Transfer, traceParent string) outbox.Event {
	return outbox.Event{
		TraceParent: traceParent,
		ID:          row.EventID,
		Type:        contract.TypeTransferReversed,
		AggregateID: row.ID.String(),
		Time:        row.CreatedAt,
		Data: contract.TransferReversed{
			ReversalID:   row.ID.String(),
			TransferID:   row.ReversesTransferID.UUID.String(),
			FromWalletID: row.FromWalletID,
			ToWalletID:   row.ToWalletID,
			Amount:       row.Amount,
			Currency:     row.Currency,
			Metadata:     mustMetadata(row.Metadata),
			CreatedAt:    row.CreatedAt.UTC(),
		},
	}
}

// ListReversals returns the reversals of a transfer, oldest first; a transfer that does not
// exist is wallet.ErrTransferNotFound.
func (s *Store) ListReversals(ctx context.Context, transferID uuid.UUID) ([]wallet.Transfer, error) {
	if _, err := s.GetTransfer(ctx, transferID); err != nil {
		return nil, err
	}
	return s.reversals(ctx, transferID)
}

func (s *Store) reversals(ctx context.Context, transferID uuid.UUID) ([]wallet.Transfer, error) {
	rows, err := s.queries.ListReversals(ctx, uuid.NullUUID{UUID: transferID, Valid: true})
	if err != nil {
		return nil, fmt.Errorf("list reversals of %s: %w", transferID, interpretError(err))
	}
	var out []wallet.Transfer // nil when there is none
	for _, r := range rows {
		out = append(out, toTransfer(r.Transfer, r.OutboxStatus))
	}
	return out, nil
}

// reversalHash fingerprints a reversal request as requestHash does a transfer's, under another
// tag: a key used for a transfer never replays as a reversal, nor the other way round.
func reversalHash(req wallet.ReversalRequest) []byte {
	h := sha256.New()
	amount := strconv.FormatInt(req.Amount, 10)
	if req.Rest {
		amount = "rest"
	}
	fields := []string{"reversal.v1", req.TransferID.String(), amount}
	if req.Force {
		fields = append(fields, "force") // absent unless forced: the fingerprints of earlier requests stand
	}
	fields = append(fields, metadataFields(req.Metadata)...) // likewise: none without metadata
	for _, field := range fields {
		fmt.Fprintf(h, "%d:%s;", len(field), field)
	}
	return h.Sum(nil)
}
