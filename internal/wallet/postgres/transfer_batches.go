package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// Atomic batches do not go through the group commit: each batch has a transaction of its own,
// which takes its locks in the order every writer of transfers takes them (every wallet of
// the batch in one statement, by id; then the key, through the batch's unique index; a batch
// reversal then its batch's legs). A refused batch writes nothing at all, its key included:
// no refusal is kept under a batch's key, and the same key may be sent again.

// CreateBatch writes every leg of req, the balances and the batch's TransferBatchCompleted
// event in one transaction, or nothing; or returns the batch an earlier request with the same
// key created.
func (s *Store) CreateBatch(ctx context.Context, req wallet.BatchRequest) (wallet.Batch, bool, error) {
	if err := req.Validate(); err != nil {
		return wallet.Batch{}, false, err
	}
	p, err := newPendingBatch(req, wallet.ActorOf(ctx))
	if err != nil {
		return wallet.Batch{}, false, err
	}
	span := &pendingTransfer{transferID: p.batchID, eventID: p.eventID}
	ctx = s.startCommit(ctx, span)
	p.traceParent = span.traceParent
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (batchResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (batchResult, error) { return s.writeBatchOfLegs(ctx, tx, p) })
	})
	span.endCommit(transferResult{replayed: r.replayed}, err)
	if err != nil {
		return wallet.Batch{}, false, fmt.Errorf("create transfer batch: %w", interpretError(err))
	}
	return r.batch, r.replayed, nil
}

// pendingBatch is a validated batch request with the ids it will be written under, fixed
// before the first transaction as a transfer's are.
type pendingBatch struct {
	req              wallet.BatchRequest
	actor            wallet.Actor
	hash             []byte
	batchID, eventID uuid.UUID
	legIDs           []uuid.UUID
	traceParent      string
}

type batchResult struct {
	batch    wallet.Batch
	replayed bool
}

func newPendingBatch(req wallet.BatchRequest, actor wallet.Actor) (pendingBatch, error) {
	ids, err := newIDs(2 + len(req.Legs))
	if err != nil {
		return pendingBatch{}, err
	}
	return pendingBatch{req: req, actor: actor, hash: batchHash(req), batchID: ids[0], eventID: ids[1], legIDs: ids[2:]}, nil
}

// newIDs are n new UUIDv7s, in order.
func newIDs(n int) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("generate id: %w", err)
		}
		ids[i] = id
	}
	return ids, nil
}

// writeBatchOfLegs writes the batch p in tx, or answers from the batch that holds its key.
func (s *Store) writeBatchOfLegs(ctx context.Context, tx pgx.Tx, p pendingBatch) (batchResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req
	ids := make([]string, 0, 2*len(req.Legs))
	for _, l := range req.Legs {
		ids = append(ids, l.FromWalletID, l.ToWalletID)
	}
	wallets, err := lockWalletsByID(ctx, q, ids)
	if err != nil {
		return batchResult{}, err
	}

	row, err := q.InsertTransferBatch(ctx, walletdb.InsertTransferBatchParams{
		ID: p.batchID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		Legs: int32(len(req.Legs)), Metadata: req.Metadata.JSON(), EventID: p.eventID,
		CreatedByKey: uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return s.answerBatchFromKey(ctx, q, p)
	case err != nil:
		return batchResult{}, fmt.Errorf("insert transfer batch: %w", err)
	}
	if err := wallet.CheckBatch(p.actor, req, wallets); err != nil {
		return batchResult{}, err
	}

	n := len(req.Legs)
	ins := walletdb.InsertBatchLegsParams{
		IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash, EventID: p.eventID, CreatedByKey: row.CreatedByKey,
		Metadata: req.Metadata.JSON(), BatchID: p.batchID, Ids: p.legIDs,
		Legs: make([]int32, n), IdempotencyOwners: make([]string, n), FromWalletIds: make([]string, n), ToWalletIds: make([]string, n),
		Amounts: make([]int64, n), Currencies: make([]string, n), TransferReferences: make([]string, n),
	}
	deltas := walletdb.AddToBalancesParams{Ids: make([]string, 0, 2*n), Deltas: make([]int64, 0, 2*n)}
	for i, l := range req.Legs {
		ins.Legs[i], ins.IdempotencyOwners[i] = int32(i), legOwner("batch", p.batchID, i)
		ins.FromWalletIds[i], ins.ToWalletIds[i], ins.Amounts[i] = l.FromWalletID, l.ToWalletID, l.Amount
		ins.Currencies[i], ins.TransferReferences[i] = l.Currency, l.Reference
		deltas.Ids = append(deltas.Ids, l.FromWalletID, l.ToWalletID)
		deltas.Deltas = append(deltas.Deltas, -l.Amount, l.Amount)
	}
	legs, err := q.InsertBatchLegs(ctx, ins)
	if err != nil {
		return batchResult{}, fmt.Errorf("insert batch legs: %w", err)
	}
	if len(legs) != n {
		return batchResult{}, fmt.Errorf("insert batch legs: %d written, want %d", len(legs), n)
	}
	if err := addToBalances(ctx, q, deltas); err != nil {
		return batchResult{}, err
	}
	kinds := make([]string, len(legs))
	for i, l := range legs {
		kinds[i] = wallet.TransferKind(wallets[l.FromWalletID], wallets[l.ToWalletID])
	}
	ev := batchCompleted(row, legs, kinds, p.traceParent)
	status, err := s.outbox.Add(ctx, tx, ev)
	if err != nil {
		return batchResult{}, err
	}
	return batchResult{batch: toBatch(row, status, toTransfers(legs, status))}, nil
}

// legOwner is the idempotency owner of leg i of the batch (or batch reversal) id: a leg claims
// no key of its own (db/schema/wallet/00016).
func legOwner(kind string, id uuid.UUID, i int) string {
	return kind + ":" + id.String() + ":" + strconv.Itoa(i)
}

// lockWalletsByID locks the wallets ids names (repeated or not) in one statement, in id order
// as every writer of transfers does, and returns those that exist by id.
func lockWalletsByID(ctx context.Context, q *walletdb.Queries, ids []string) (map[string]*wallet.Wallet, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	locked, err := q.LockWallets(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("lock wallets: %w", err)
	}
	return lockedWallets(locked), nil
}

// addToBalances applies deltas, summed per wallet, and checks that every wallet changed.
func addToBalances(ctx context.Context, q *walletdb.Queries, deltas walletdb.AddToBalancesParams) error {
	touched := slices.Clone(deltas.Ids)
	slices.Sort(touched)
	touched = slices.Compact(touched)
	changed, err := q.AddToBalances(ctx, deltas)
	if err != nil {
		return fmt.Errorf("update balances: %w", err)
	}
	if changed != int64(len(touched)) {
		return fmt.Errorf("update balances: %d wallets changed, want %d", changed, len(touched))
	}
	return nil
}

// answerBatchFromKey answers a batch request whose key another batch holds: a replay of it
// when the request is the same, idempotency-key-reused otherwise.
func (s *Store) answerBatchFromKey(ctx context.Context, q *walletdb.Queries, p pendingBatch) (batchResult, error) {
	existing, err := q.GetTransferBatchByIdempotencyKey(ctx, walletdb.GetTransferBatchByIdempotencyKeyParams{
		IdempotencyOwner: p.actor.Owner, IdempotencyKey: p.req.IdempotencyKey,
	})
	if err != nil {
		return batchResult{}, fmt.Errorf("load transfer batch by idempotency key: %w", err)
	}
	if string(existing.TransferBatch.RequestHash) != string(p.hash) {
		return batchResult{}, problem.Newf(wallet.ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for transfer batch %s, which differs from this request", p.req.IdempotencyKey, existing.TransferBatch.ID)
	}
	b, err := batchWithLegs(ctx, q, existing.TransferBatch, existing.OutboxStatus)
	return batchResult{batch: b, replayed: true}, err
}

// batchWithLegs is the batch row with its legs.
func batchWithLegs(ctx context.Context, q *walletdb.Queries, row walletdb.TransferBatch, status string) (wallet.Batch, error) {
	rows, err := q.ListBatchLegs(ctx, uuid.NullUUID{UUID: row.ID, Valid: true})
	if err != nil {
		return wallet.Batch{}, fmt.Errorf("list legs of batch %s: %w", row.ID, err)
	}
	legs := make([]wallet.Transfer, len(rows))
	for i, r := range rows {
		legs[i] = toTransfer(r.Transfer, r.OutboxStatus)
	}
	return toBatch(row, status, legs), nil
}

// GetBatch returns the batch with this id, its legs and its reversals' ids; for an owner, a
// batch with a leg it may not see is not found.
func (s *Store) GetBatch(ctx context.Context, id uuid.UUID) (wallet.Batch, error) {
	row, err := s.queries.GetTransferBatch(ctx, walletdb.GetTransferBatchParams{ID: id, Owner: wallet.ActorOf(ctx).OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.Batch{}, problem.Newf(wallet.ErrBatchNotFound, "transfer batch %s does not exist", id)
	case err != nil:
		return wallet.Batch{}, fmt.Errorf("get transfer batch %s: %w", id, err)
	}
	b, err := batchWithLegs(ctx, s.queries, row.TransferBatch, row.OutboxStatus)
	if err != nil {
		return wallet.Batch{}, fmt.Errorf("get transfer batch %s: %w", id, interpretError(err))
	}
	reversals, err := s.queries.ListBatchReversals(ctx, id)
	if err != nil {
		return wallet.Batch{}, fmt.Errorf("list reversals of batch %s: %w", id, interpretError(err))
	}
	b.Reversals = make([]uuid.UUID, len(reversals))
	for i, r := range reversals {
		b.Reversals[i] = r.ID
	}
	return b, nil
}

// ReverseBatch reverses the legs req names (every leg when none) in full, together, with the
// batch reversal's TransferBatchReversed event, in one transaction; or returns the batch
// reversal an earlier request with the same key made.
func (s *Store) ReverseBatch(ctx context.Context, req wallet.BatchReversalRequest) (wallet.BatchReversal, bool, error) {
	if err := req.Validate(); err != nil {
		return wallet.BatchReversal{}, false, err
	}
	ids, err := newIDs(2 + contract.MaxBatchLegs)
	if err != nil {
		return wallet.BatchReversal{}, false, err
	}
	p := pendingBatchReversal{req: req, actor: wallet.ActorOf(ctx), hash: batchReversalHash(req), id: ids[0], eventID: ids[1], reversalIDs: ids[2:]}
	span := &pendingTransfer{transferID: p.id, eventID: p.eventID}
	ctx = s.startCommit(ctx, span)
	p.traceParent = span.traceParent
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (batchReversalResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (batchReversalResult, error) { return s.writeBatchReversal(ctx, tx, p) })
	})
	span.endCommit(transferResult{replayed: r.replayed}, err)
	if err != nil {
		return wallet.BatchReversal{}, false, fmt.Errorf("reverse transfer batch %s: %w", req.BatchID, interpretError(err))
	}
	return r.reversal, r.replayed, nil
}

type pendingBatchReversal struct {
	req         wallet.BatchReversalRequest
	actor       wallet.Actor
	hash        []byte
	id, eventID uuid.UUID
	reversalIDs []uuid.UUID // enough for every leg; the first ones are used
	traceParent string
}

type batchReversalResult struct {
	reversal wallet.BatchReversal
	replayed bool
}

func (s *Store) writeBatchReversal(ctx context.Context, tx pgx.Tx, p pendingBatchReversal) (batchReversalResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req

	// (a) The batch, as the actor may see it, and its legs' wallets, which never change: read
	// unlocked.
	batch, err := q.GetTransferBatch(ctx, walletdb.GetTransferBatchParams{ID: req.BatchID, Owner: p.actor.OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return batchReversalResult{}, problem.Newf(wallet.ErrBatchNotFound, "transfer batch %s does not exist", req.BatchID)
	case err != nil:
		return batchReversalResult{}, fmt.Errorf("get transfer batch: %w", err)
	}
	legs, err := batchWithLegs(ctx, q, batch.TransferBatch, batch.OutboxStatus)
	if err != nil {
		return batchReversalResult{}, err
	}
	chosen, index, err := req.ChooseLegs(legs.Legs)
	if err != nil {
		return batchReversalResult{}, err
	}

	// (b) The wallets, in id order, then the legs, which serialise the reversals of a batch.
	ids := make([]string, 0, 2*len(chosen))
	for _, l := range chosen {
		ids = append(ids, l.FromWalletID, l.ToWalletID)
	}
	wallets, err := lockWalletsByID(ctx, q, ids)
	if err != nil {
		return batchReversalResult{}, err
	}
	lockedLegs, err := q.LockBatchLegs(ctx, uuid.NullUUID{UUID: req.BatchID, Valid: true})
	if err != nil {
		return batchReversalResult{}, fmt.Errorf("lock batch legs: %w", err)
	}
	reversed := make(map[uuid.UUID]int64, len(lockedLegs))
	for _, l := range lockedLegs {
		reversed[l.ID] = l.ReversedAmount
	}

	// (c) Claim the key: a replay answers with the key's batch reversal, before any rule.
	row, err := q.InsertBatchReversal(ctx, walletdb.InsertBatchReversalParams{
		ID: p.id, BatchID: req.BatchID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		Legs: int32(len(chosen)), Metadata: req.Metadata.JSON(), EventID: p.eventID,
		CreatedByKey: uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return answerBatchReversalFromKey(ctx, q, p)
	case err != nil:
		return batchReversalResult{}, fmt.Errorf("insert batch reversal: %w", err)
	}

	// (d) The rules, leg by leg against the running balances: the actor may take the money
	// back from each receiver, each leg is not reversed yet, and the money may move back.
	legIDs := make([]uuid.UUID, len(chosen))
	owners := make([]string, len(chosen))
	deltas := walletdb.AddToBalancesParams{Ids: make([]string, 0, 2*len(chosen)), Deltas: make([]int64, 0, 2*len(chosen))}
	for j, l := range chosen {
		l.ReversedAmount = reversed[l.ID]
		from, to := wallets[l.ToWalletID], wallets[l.FromWalletID]
		if err := checkLegReverser(p.actor, l, from, to); err != nil {
			return batchReversalResult{}, wallet.LegRefusal(index[j], err)
		}
		if err := wallet.CheckLegReversal(index[j], l, from, to); err != nil {
			return batchReversalResult{}, err
		}
		legIDs[j] = l.ID
		owners[j] = legOwner("batch-reversal", p.id, batchLegIndex(legs.Legs, l.ID))
		deltas.Ids = append(deltas.Ids, l.ToWalletID, l.FromWalletID)
		deltas.Deltas = append(deltas.Deltas, -l.Amount, l.Amount)
	}

	// (e) The reversals, the legs' running totals (the CHECK keeps each within its amount),
	// the balances and the event.
	rows, err := q.InsertLegReversals(ctx, walletdb.InsertLegReversalsParams{
		IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash, EventID: p.eventID, CreatedByKey: row.CreatedByKey,
		Metadata: req.Metadata.JSON(), BatchReversalID: p.id,
		Ids: p.reversalIDs[:len(chosen)], LegIds: legIDs, IdempotencyOwners: owners,
	})
	if err != nil {
		return batchReversalResult{}, fmt.Errorf("insert leg reversals: %w", err)
	}
	if len(rows) != len(chosen) {
		return batchReversalResult{}, fmt.Errorf("insert leg reversals: %d written, want %d", len(rows), len(chosen))
	}
	n, err := q.ReverseLegsInFull(ctx, legIDs)
	if err != nil {
		return batchReversalResult{}, legsReversedError(req.BatchID, err)
	}
	if n != int64(len(chosen)) {
		return batchReversalResult{}, fmt.Errorf("reverse legs: %d changed, want %d", n, len(chosen))
	}
	if err := addToBalances(ctx, q, deltas); err != nil {
		return batchReversalResult{}, err
	}
	status, err := s.outbox.Add(ctx, tx, batchReversed(row, rows, p.traceParent))
	if err != nil {
		return batchReversalResult{}, err
	}
	return batchReversalResult{reversal: toBatchReversal(row, status, toTransfers(rows, status))}, nil
}

// checkLegReverser applies the actor's rights to the reversal of leg, which takes the money
// back from its receiver (from) to its sender (to), as checkReverser does a transfer's: the
// batch is visible to the actor, so it sees one of the leg's wallets at least.
func checkLegReverser(a wallet.Actor, leg wallet.Transfer, from, to *wallet.Wallet) error {
	if from == nil || !a.Reads(from.Owner) {
		return problem.Newf(wallet.ErrForbidden, "transfer %s can be reversed only by the owner of the wallet that received it", leg.ID)
	}
	return wallet.CheckDebit(a, "to_wallet_id", from)
}

// batchLegIndex is the index in its batch of the leg id.
func batchLegIndex(legs []wallet.Transfer, id uuid.UUID) int {
	return slices.IndexFunc(legs, func(t wallet.Transfer) bool { return t.ID == id })
}

// legsReversedError names the database's refusal of a leg reversed twice.
func legsReversedError(batchID uuid.UUID, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "transfers_reversed_within_amount" {
		return problem.Newf(wallet.ErrNothingToReverse, "a leg of batch %s is reversed already", batchID)
	}
	return fmt.Errorf("reverse legs: %w", err)
}

// answerBatchReversalFromKey answers a batch reversal whose key another holds: a replay of it
// when the request is the same, idempotency-key-reused otherwise.
func answerBatchReversalFromKey(ctx context.Context, q *walletdb.Queries, p pendingBatchReversal) (batchReversalResult, error) {
	existing, err := q.GetBatchReversalByIdempotencyKey(ctx, walletdb.GetBatchReversalByIdempotencyKeyParams{
		IdempotencyOwner: p.actor.Owner, IdempotencyKey: p.req.IdempotencyKey,
	})
	if err != nil {
		return batchReversalResult{}, fmt.Errorf("load batch reversal by idempotency key: %w", err)
	}
	if string(existing.BatchReversal.RequestHash) != string(p.hash) {
		return batchReversalResult{}, problem.Newf(wallet.ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for batch reversal %s, which differs from this request", p.req.IdempotencyKey, existing.BatchReversal.ID)
	}
	r, err := batchReversalWithLegs(ctx, q, existing.BatchReversal, existing.OutboxStatus)
	return batchReversalResult{reversal: r, replayed: true}, err
}

func batchReversalWithLegs(ctx context.Context, q *walletdb.Queries, row walletdb.BatchReversal, status string) (wallet.BatchReversal, error) {
	rows, err := q.ListBatchReversalLegs(ctx, uuid.NullUUID{UUID: row.ID, Valid: true})
	if err != nil {
		return wallet.BatchReversal{}, fmt.Errorf("list reversals of batch reversal %s: %w", row.ID, err)
	}
	reversals := make([]wallet.Transfer, len(rows))
	for i, r := range rows {
		reversals[i] = toTransfer(r.Transfer, r.OutboxStatus)
	}
	return toBatchReversal(row, status, reversals), nil
}

// batchCompleted is the event of a batch just written, with its legs in order.
func batchCompleted(b walletdb.TransferBatch, legs []walletdb.Transfer, kinds []string, traceParent string) outbox.Event {
	data := contract.TransferBatchCompleted{
		BatchID: b.ID.String(), Transfers: make([]contract.BatchLeg, len(legs)),
		Metadata: mustMetadata(b.Metadata), CreatedAt: b.CreatedAt.UTC(),
	}
	for i, l := range legs {
		data.Transfers[i] = contract.BatchLeg{
			TransferID: l.ID.String(), FromWalletID: l.FromWalletID, ToWalletID: l.ToWalletID,
			Amount: l.Amount, Currency: l.Currency, Reference: l.Reference,
			Kind: kinds[i],
		}
	}
	return outbox.Event{
		TraceParent: traceParent, ID: b.EventID, Type: contract.TypeTransferBatchCompleted,
		AggregateID: b.ID.String(), Time: b.CreatedAt, Data: data,
	}
}

// batchReversed is the event of a batch reversal just written, with its reversals in the
// legs' order.
func batchReversed(r walletdb.BatchReversal, reversals []walletdb.Transfer, traceParent string) outbox.Event {
	data := contract.TransferBatchReversed{
		BatchReversalID: r.ID.String(), BatchID: r.BatchID.String(), Reversals: make([]contract.BatchLegReversal, len(reversals)),
		Metadata: mustMetadata(r.Metadata), CreatedAt: r.CreatedAt.UTC(),
	}
	for i, t := range reversals {
		data.Reversals[i] = contract.BatchLegReversal{
			ReversalID: t.ID.String(), TransferID: t.ReversesTransferID.UUID.String(),
			FromWalletID: t.FromWalletID, ToWalletID: t.ToWalletID, Amount: t.Amount, Currency: t.Currency,
		}
	}
	return outbox.Event{
		TraceParent: traceParent, ID: r.EventID, Type: contract.TypeTransferBatchReversed,
		AggregateID: r.ID.String(), Time: r.CreatedAt, Data: data,
	}
}

func toTransfers(rows []walletdb.Transfer, status string) []wallet.Transfer {
	out := make([]wallet.Transfer, len(rows))
	for i, r := range rows {
		out[i] = toTransfer(r, status)
	}
	return out
}

func toBatch(b walletdb.TransferBatch, status string, legs []wallet.Transfer) wallet.Batch {
	return wallet.Batch{
		ID: b.ID, IdempotencyKey: b.IdempotencyKey, Status: wallet.StatusCompleted, Legs: legs,
		Metadata: mustMetadata(b.Metadata), OutboxStatus: status, EventID: b.EventID, CreatedAt: b.CreatedAt.UTC(),
	}
}

func toBatchReversal(r walletdb.BatchReversal, status string, reversals []wallet.Transfer) wallet.BatchReversal {
	return wallet.BatchReversal{
		ID: r.ID, BatchID: r.BatchID, IdempotencyKey: r.IdempotencyKey, Status: wallet.StatusCompleted, Reversals: reversals,
		Metadata: mustMetadata(r.Metadata), OutboxStatus: status, EventID: r.EventID, CreatedAt: r.CreatedAt.UTC(),
	}
}

// batchHash fingerprints a batch request as requestHash does a transfer's, under its own tag.
func batchHash(req wallet.BatchRequest) []byte {
	fields := []string{"batch.v1", strconv.Itoa(len(req.Legs))}
	for _, l := range req.Legs {
		fields = append(fields, l.FromWalletID, l.ToWalletID, strconv.FormatInt(l.Amount, 10), l.Currency, l.Reference)
	}
	fields = append(fields, metadataFields(req.Metadata)...)
	return fingerprint(fields...)
}

// batchReversalHash fingerprints a batch reversal request.
func batchReversalHash(req wallet.BatchReversalRequest) []byte {
	fields := []string{"batch-reversal.v1", req.BatchID.String()}
	if req.Legs == nil {
		fields = append(fields, "all")
	} else {
		fields = append(fields, strconv.Itoa(len(req.Legs)))
		for _, id := range req.Legs {
			fields = append(fields, id.String())
		}
	}
	fields = append(fields, metadataFields(req.Metadata)...)
	return fingerprint(fields...)
}
