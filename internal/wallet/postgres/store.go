// Package postgres stores wallets, transfers and reversals in PostgreSQL and writes each
// transfer's TransferCompleted event (a reversal's TransferReversed) to the outbox in the same
// transaction. The sqlc code in walletdb
// stays behind this package: callers see wallet types and wallet errors only.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
	"walletgl/internal/faults"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// Store is the wallet service over PostgreSQL. While Run runs, its transfer requests are
// committed in batches (group commit); otherwise each has a transaction of its own.
type Store struct {
	pool    *pgxpool.Pool
	queries *walletdb.Queries
	outbox  *outbox.Outbox
	faults  *faults.Set
	log     zerolog.Logger
	metrics *metrics.Wallet
	tracer  trace.Tracer
	batch   *batcher[*pendingTransfer, transferResult]
	counts  batchCounters
	// lookupFirst: the last batch held a replay or a refusal, so the next one looks its keys
	// up first instead of trying the optimistic path.
	lookupFirst atomic.Bool
	eventType   string    // Options.TransferEventType
	audit       AuditFunc // Options.Audit
}

// AuditFunc records an action in the audit trail, in db (the transaction of the change), as
// whoever the request of ctx acts for (httpapi.AuditByKey: its API key).
type AuditFunc func(ctx context.Context, db database.Executor, action, target string, detail any) error

// The audit trail's actions of the store: a change of a wallet's limits or of its metadata
// (target: the wallet) and a reversal that took its from-wallet below its minimum (target: the
// reversal).
const (
	ActionWalletLimits   = "wallet.limits"
	ActionWalletMetadata = "wallet.metadata"
	ActionForcedReversal = "transfer.reversal.forced"
)

// errUnaudited refuses a change the store must audit when it has no audit trail (Options.Audit).
var errUnaudited = errors.New("the store has no audit trail (Options.Audit)")

var _ wallet.Service = (*Store)(nil)

// Options configures a Store. The zero value is a store that batches with the defaults, logs
// nothing, arms no fault point and writes its events pending for any relay to claim.
type Options struct {
	// Batch sizes the group commit Run does; zero fields take the defaults.
	Batch BatchConfig
	// Log is where the batcher reports a batch rolled back and run one request at a time; the
	// zero Logger discards it.
	Log zerolog.Logger
	// Faults arms the store's fault points (the transfer's after-commit crash); nil arms none.
	Faults *faults.Set
	// PublishOnCommit, the wallet's relay, has the TransferCompleted events of committed
	// transfers published right after the commit (outbox.Outbox.PublishOnCommit); nil leaves
	// them pending for a relay's claim.
	PublishOnCommit *outbox.Relay
	// Metrics records the size of each committed batch (nil: nothing).
	Metrics *metrics.Wallet
	// TransferEventType is the version of the transfer event written: contract.TypeTransferCompletedV2
	// (the default, when empty) or contract.TypeTransferCompleted while a GL older than v2 is
	// still deployed (WALLET_TRANSFER_EVENT_VERSION).
	TransferEventType string
	// Tracer makes the commit span of each traced transfer request, whose traceparent its
	// outbox row stores (nil: a no-op tracer; the row still stores the request's trace context).
	Tracer trace.Tracer
	// Audit records the changes the store audits (SetLimits, a forced reversal) in their own
	// transaction; nil refuses them.
	Audit AuditFunc
}

// NewStore returns a Store on pool, whose database has the "wallet" migrations applied.
func NewStore(pool *pgxpool.Pool, opts Options) *Store {
	s := &Store{
		pool: pool, queries: walletdb.New(pool), outbox: outbox.New(contract.SourceWallet),
		faults: opts.Faults, log: opts.Log, metrics: opts.Metrics, tracer: opts.Tracer,
		eventType: opts.TransferEventType, audit: opts.Audit,
	}
	if s.eventType == "" {
		s.eventType = contract.TypeTransferCompletedV2
	}
	if s.tracer == nil {
		s.tracer = noop.NewTracerProvider().Tracer("")
	}
	if opts.PublishOnCommit != nil {
		s.outbox.PublishOnCommit(opts.PublishOnCommit)
	}
	s.batch = newBatcher(opts.Batch, s.writeTransfers)
	return s
}

// Run batches CreateTransfer requests until ctx is cancelled: each batch is one transaction.
// Without Run, each request has a transaction of its own. On cancellation Run stops taking
// requests (later ones get their own transaction), commits what is queued and returns once
// every request it took has its answer.
func (s *Store) Run(ctx context.Context) error { return s.batch.run(ctx) }

// CreateWallet creates an empty wallet.
func (s *Store) CreateWallet(ctx context.Context, w wallet.Wallet) (wallet.Wallet, error) {
	if err := w.Validate(); err != nil {
		return wallet.Wallet{}, err
	}
	row, err := s.queries.CreateWallet(ctx, walletdb.CreateWalletParams{
		ID: w.ID, Currency: w.Currency, AllowNegative: w.AllowNegative, Owner: wallet.ActorOf(ctx).OwnerFilter(),
		MinBalance: w.MinBalance, MaxBalance: w.MaxBalance, Metadata: w.Metadata.JSON(),
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow): // ON CONFLICT DO NOTHING: the id is taken
		return wallet.Wallet{}, problem.Newf(wallet.ErrWalletExists, "wallet %q exists", w.ID)
	case err != nil:
		return wallet.Wallet{}, fmt.Errorf("create wallet %s: %w", w.ID, err)
	}
	return toWallet(row), nil
}

// GetWallet returns the wallet with this id; another owner's wallet is not found.
func (s *Store) GetWallet(ctx context.Context, id string) (wallet.Wallet, error) {
	row, err := s.queries.GetWallet(ctx, walletdb.GetWalletParams{ID: id, Owner: wallet.ActorOf(ctx).OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.Wallet{}, problem.Newf(wallet.ErrWalletNotFound, "wallet %q does not exist", id)
	case err != nil:
		return wallet.Wallet{}, fmt.Errorf("get wallet %s: %w", id, err)
	}
	return toWallet(row), nil
}

// ListWallets returns up to q.Limit wallets before the cursor, newest first, that the actor
// may see: those whose metadata hold every pair of q.Metadata, when set. A limit out of range
// is brought into 1..wallet.MaxListLimit (0 means wallet.DefaultListLimit). A cursor that
// names no wallet the actor may see is wallet.ErrInvalidCursor.
func (s *Store) ListWallets(ctx context.Context, q wallet.WalletQuery) (wallet.WalletPage, error) {
	if err := q.Metadata.Validate(); err != nil {
		return wallet.WalletPage{}, err
	}
	owner := wallet.ActorOf(ctx).OwnerFilter()
	var before *time.Time
	var beforeID *string
	if !q.Before.IsZero() {
		exists, err := s.queries.WalletCursorExists(ctx, walletdb.WalletCursorExistsParams{ID: q.Before.ID, CreatedAt: q.Before.CreatedAt, Owner: owner})
		if err != nil {
			return wallet.WalletPage{}, fmt.Errorf("look up cursor wallet %s: %w", q.Before.ID, interpretError(err))
		}
		if !exists {
			return wallet.WalletPage{}, problem.Newf(wallet.ErrInvalidCursor, "cursor %q names no wallet of this listing", q.Before.String())
		}
		before, beforeID = &q.Before.CreatedAt, &q.Before.ID
	}
	limit := pageLimit(q.Limit)
	var rows []walletdb.Wallet
	var err error
	if len(q.Metadata) > 0 {
		rows, err = s.queries.ListWalletsByMetadata(ctx, walletdb.ListWalletsByMetadataParams{
			Metadata: q.Metadata.JSON(), BeforeCreatedAt: before, BeforeID: beforeID, Owner: owner, RowLimit: int32(limit + 1),
		})
	} else {
		rows, err = s.queries.ListWallets(ctx, walletdb.ListWalletsParams{
			BeforeCreatedAt: before, BeforeID: beforeID, Owner: owner, RowLimit: int32(limit + 1), // one more: is there a next page?
		})
	}
	if err != nil {
		return wallet.WalletPage{}, fmt.Errorf("list wallets: %w", interpretError(err))
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	page := wallet.WalletPage{Wallets: make([]wallet.Wallet, 0, len(rows))}
	for _, row := range rows {
		page.Wallets = append(page.Wallets, toWallet(row))
	}
	if more {
		page.Next = page.Wallets[len(page.Wallets)-1].Cursor()
	}
	return page, nil
}

// UpdateWallet changes the limits of wallet id under its lock (wallet.ApplyLimits) and, when
// ch says so, replaces its metadata; each change is audited in the same transaction (the limits
// as wallet.limits, the metadata as wallet.metadata). Another owner's wallet is not found.
func (s *Store) UpdateWallet(ctx context.Context, id string, ch wallet.WalletChange) (wallet.Wallet, error) {
	if s.audit == nil {
		return wallet.Wallet{}, fmt.Errorf("update wallet %s: %w", id, errUnaudited)
	}
	if err := ch.Metadata.Validate(); err != nil {
		return wallet.Wallet{}, err
	}
	w, err := database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (wallet.Wallet, error) {
		q := s.queries.WithTx(tx)
		row, err := q.LockWallet(ctx, walletdb.LockWalletParams{ID: id, Owner: wallet.ActorOf(ctx).OwnerFilter()})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow):
			return wallet.Wallet{}, problem.Newf(wallet.ErrWalletNotFound, "wallet %q does not exist", id)
		case err != nil:
			return wallet.Wallet{}, fmt.Errorf("lock wallet: %w", err)
		}
		if ch.ChangesLimits() {
			if row, err = s.setLimits(ctx, tx, q, toWallet(row), ch.LimitsChange); err != nil {
				return wallet.Wallet{}, err
			}
		}
		if ch.SetMetadata {
			if row, err = s.setMetadata(ctx, tx, q, toWallet(row), ch.Metadata); err != nil {
				return wallet.Wallet{}, err
			}
		}
		return toWallet(row), nil
	})
	if err != nil {
		return wallet.Wallet{}, fmt.Errorf("update wallet %s: %w", id, interpretError(err))
	}
	return w, nil
}

// setLimits applies ch to before, the wallet tx locked, and audits the change.
func (s *Store) setLimits(ctx context.Context, tx pgx.Tx, q *walletdb.Queries, before wallet.Wallet, ch wallet.LimitsChange) (walletdb.Wallet, error) {
	after, err := wallet.ApplyLimits(before, ch)
	if err != nil {
		return walletdb.Wallet{}, err
	}
	row, err := q.SetWalletLimits(ctx, walletdb.SetWalletLimitsParams{ID: before.ID, MinBalance: after.MinBalance, MaxBalance: after.MaxBalance})
	if err != nil {
		return walletdb.Wallet{}, fmt.Errorf("update limits: %w", err)
	}
	detail := struct {
		Before limitsDetail `json:"before"`
		After  limitsDetail `json:"after"`
	}{limitsOf(before), limitsOf(after)}
	if err := s.audit(ctx, tx, ActionWalletLimits, before.ID, detail); err != nil {
		return walletdb.Wallet{}, err
	}
	return row, nil
}

// setMetadata replaces the metadata of before, the wallet tx locked, by m and audits the
// change.
func (s *Store) setMetadata(ctx context.Context, tx pgx.Tx, q *walletdb.Queries, before wallet.Wallet, m metadata.Metadata) (walletdb.Wallet, error) {
	row, err := q.SetWalletMetadata(ctx, walletdb.SetWalletMetadataParams{ID: before.ID, Metadata: m.JSON()})
	if err != nil {
		return walletdb.Wallet{}, fmt.Errorf("update metadata: %w", err)
	}
	detail := struct {
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}{before.Metadata.JSON(), m.JSON()}
	if err := s.audit(ctx, tx, ActionWalletMetadata, before.ID, detail); err != nil {
		return walletdb.Wallet{}, err
	}
	return row, nil
}

// limitsDetail is a wallet's limits as the audit trail records them.
type limitsDetail struct {
	MinBalance *int64 `json:"min_balance"` // null: none (a wallet that may go negative)
	MaxBalance *int64 `json:"max_balance"`
}

func limitsOf(w wallet.Wallet) limitsDetail {
	d := limitsDetail{MaxBalance: w.MaxBalance}
	if !w.AllowNegative {
		d.MinBalance = &w.MinBalance
	}
	return d
}

// CreateTransfer moves the money and records the transfer and its TransferCompleted event, all
// in one transaction, or returns the transfer an earlier request with the same key created.
// While Run is running the request shares its transaction with concurrent ones (see Run);
// otherwise it has a transaction of its own.
func (s *Store) CreateTransfer(ctx context.Context, req wallet.TransferRequest) (wallet.Transfer, bool, error) {
	if err := req.Validate(); err != nil {
		return wallet.Transfer{}, false, err
	}
	p, err := newPendingTransfer(req, wallet.ActorOf(ctx))
	if err != nil {
		return wallet.Transfer{}, false, err
	}
	// A caller that stops waiting gets ctx's error, while its batch may still commit the
	// transfer; a retry with the same key finds it.
	ctx = s.startCommit(ctx, p)
	r, batched, err := s.batch.do(ctx, p)
	if !batched {
		r, err = s.createOne(ctx, p)
	}
	p.endCommit(r, err)
	if err != nil {
		return wallet.Transfer{}, false, fmt.Errorf("create transfer: %w", interpretError(err))
	}
	if err := s.faults.Hit(faults.TransferAfterCommit); err != nil {
		return wallet.Transfer{}, false, err
	}
	return r.transfer, r.replayed, nil
}

// pendingTransfer is a validated request on its way to the database, with the ids it will be
// written under.
type pendingTransfer struct {
	req   wallet.TransferRequest
	actor wallet.Actor // who asks: whose wallets it may debit, whose key it uses
	hash  []byte
	// The ids exist before any transaction so that a retried transaction (deadlock,
	// serialization failure, a batch run again one by one) writes the same transfer and event.
	transferID, eventID uuid.UUID
	// The commit span of a traced request (nil: untraced) and its traceparent, which the
	// event's outbox row stores, fixed before any transaction as the ids are.
	span        trace.Span
	traceParent string
}

// key is the request's Idempotency-Key as its owner holds it.
func (p *pendingTransfer) key() claimedKey {
	return claimedKey{owner: p.actor.Owner, key: p.req.IdempotencyKey}
}

// transferResult is a request's answer: its transfer, and whether an earlier request with the
// same key created it.
type transferResult struct {
	transfer wallet.Transfer
	replayed bool
}

func newPendingTransfer(req wallet.TransferRequest, actor wallet.Actor) (*pendingTransfer, error) {
	transferID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("generate transfer id: %w", err)
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("generate event id: %w", err)
	}
	return &pendingTransfer{req: req, actor: actor, hash: requestHash(req), transferID: transferID, eventID: eventID}, nil
}

// createOne writes one transfer in a transaction of its own: the path without the batcher, and
// the fallback of a batch that could not commit as a whole. A deadlock or a serialization
// failure says nothing about the request, and another attempt writes the same transfer and
// event (their ids are fixed before the first): retried here, rather than answered 500.
//
// A refusal is kept under the request's key before createOne returns, so that the next request
// the batch worker runs with that key (it runs them in arrival order) finds it.
func (s *Store) createOne(ctx context.Context, p *pendingTransfer) (transferResult, error) {
	r, err := database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() (transferResult, error) {
		return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (transferResult, error) { return s.writeOne(ctx, tx, p) })
	})
	return r, s.keepRefusal(ctx, spaceTransfer, p.key(), p.hash, err)
}

// writeOne writes one transfer in tx, or answers from the transfer that holds its key.
func (s *Store) writeOne(ctx context.Context, tx pgx.Tx, p *pendingTransfer) (transferResult, error) {
	q := s.queries.WithTx(tx)
	req := p.req

	// (a) Lock both wallets in id order, before the key is claimed. Every transaction that
	// writes transfers (this one and a batch) takes its wallet locks first, in one statement
	// ordered by id, and its keys after: no two of them can wait for each other in a cycle.
	// NO KEY UPDATE leaves the KEY SHARE locks of other transfers' foreign keys alone.
	locked, err := q.LockWallets(ctx, []string{req.FromWalletID, req.ToWalletID})
	if err != nil {
		return transferResult{}, fmt.Errorf("lock wallets: %w", err)
	}
	wallets := lockedWallets(locked)
	from, to := wallets[req.FromWalletID], wallets[req.ToWalletID]
	if err := wallet.CheckDebit(p.actor, "from_wallet_id", from); err != nil {
		return transferResult{}, err
	}

	// (b) Claim the key. A concurrent request with the same key waits here on the unique
	// index until the first one commits (then it conflicts) or rolls back (then it claims).
	row, err := q.InsertTransfer(ctx, walletdb.InsertTransferParams{
		ID: p.transferID, IdempotencyOwner: p.actor.Owner, IdempotencyKey: req.IdempotencyKey, RequestHash: p.hash,
		FromWalletID: req.FromWalletID, ToWalletID: req.ToWalletID,
		Amount: req.Amount, Currency: req.Currency, EventID: p.eventID,
		CreatedByKey: uuid.NullUUID{UUID: req.KeyID, Valid: req.KeyID != uuid.Nil},
		Reference:    req.Reference,
		Metadata:     req.Metadata.JSON(),
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow): // ON CONFLICT DO NOTHING: the key is taken
		return answerFromKey(ctx, q, p)
	case err != nil:
		return transferResult{}, claimError(req, err)
	}
	if err := checkRefusal(ctx, q, spaceTransfer, p.key(), p.hash); err != nil {
		return transferResult{}, err
	}
	if err := wallet.CheckTransfer(req, from, to); err != nil {
		return transferResult{}, refuse(err)
	}

	// (c) Both balances in one statement.
	n, err := q.AddToBalances(ctx, walletdb.AddToBalancesParams{
		Ids:    []string{req.FromWalletID, req.ToWalletID},
		Deltas: []int64{-req.Amount, req.Amount},
	})
	if err != nil {
		return transferResult{}, fmt.Errorf("update balances: %w", err)
	}
	if n != 2 {
		return transferResult{}, fmt.Errorf("update balances: %d wallets changed, want 2", n)
	}

	// (d) The event commits or rolls back with the transfer.
	kind := wallet.TransferKind(from, to)
	status, err := s.outbox.Add(ctx, tx, transferCompleted(row, p.traceParent, kind, s.eventType))
	if err != nil {
		return transferResult{}, err
	}
	return transferResult{transfer: toTransfer(row, status)}, nil
}

// answerFromKey answers a request whose key another transfer holds: a replay, or a refusal.
func answerFromKey(ctx context.Context, q *walletdb.Queries, p *pendingTransfer) (transferResult, error) {
	existing, err := q.GetTransferByIdempotencyKey(ctx, walletdb.GetTransferByIdempotencyKeyParams{
		IdempotencyOwner: p.actor.Owner, IdempotencyKey: p.req.IdempotencyKey,
	})
	if err != nil {
		return transferResult{}, fmt.Errorf("load transfer by idempotency key: %w", err)
	}
	t, err := answerFromOwner(p, keyOwner{
		transfer: toTransfer(existing.Transfer, existing.OutboxStatus), hash: existing.Transfer.RequestHash,
	})
	if err != nil {
		return transferResult{}, err
	}
	return transferResult{transfer: t, replayed: true}, nil
}

// answerFromOwner answers p from the transfer that holds its key: a replay or a refusal
// (wallet.Replay).
func answerFromOwner(p *pendingTransfer, owner keyOwner) (wallet.Transfer, error) {
	return wallet.Replay(p.req.IdempotencyKey, p.hash, owner.hash, owner.transfer)
}

// keyOwner is the transfer that holds an idempotency key, with the fingerprint of its request.
type keyOwner struct {
	transfer wallet.Transfer
	hash     []byte
}

// transferCompleted is the event of a transfer just written, of kind, in the trace of
// traceParent, as the type the published version eventType gives its kind
// (contract.TransferEventTypeFor: v1 only for a deposit, which drops the reference).
func transferCompleted(row walletdb.Transfer, traceParent, kind, published string) outbox.Event {
	eventType := contract.TransferEventTypeFor(published, kind)
	return outbox.Event{
		TraceParent: traceParent,
		ID:          row.EventID,
		Type:        eventType,
		AggregateID: row.ID.String(),
		Time:        row.CreatedAt,
		Data: contract.TransferCompleted{
			TransferID:   row.ID.String(),
			FromWalletID: row.FromWalletID,
			ToWalletID:   row.ToWalletID,
			Amount:       row.Amount,
			Currency:     row.Currency,
			Kind:         kind,
			Reference:    row.Reference,
			Metadata:     mustMetadata(row.Metadata),
			CreatedAt:    row.CreatedAt.UTC(),
		}.AsVersion(eventType),
	}
}

// claimError explains why the transfer row could not be inserted.
func claimError(req wallet.TransferRequest, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23503" && pgErr.ConstraintName == "transfers_from_wallet_id_fkey":
			return problem.Newf(wallet.ErrWalletNotFound, "from_wallet_id %q does not exist", req.FromWalletID)
		case pgErr.Code == "23503" && pgErr.ConstraintName == "transfers_to_wallet_id_fkey":
			return problem.Newf(wallet.ErrWalletNotFound, "to_wallet_id %q does not exist", req.ToWalletID)
		case pgErr.Code == "55P03":
			// Only with a lock_timeout set on the connection: the request that holds the key
			// has not finished within it.
			return problem.Newf(wallet.ErrIdempotencyKeyInFlight,
				"a request with Idempotency-Key %q is still being processed; retry later", req.IdempotencyKey)
		}
	}
	return fmt.Errorf("insert transfer: %w", err)
}

// lockedWallets are the wallets LockWallets returned, by id, as the rules read them.
func lockedWallets(rows []walletdb.LockWalletsRow) map[string]*wallet.Wallet {
	wallets := make(map[string]*wallet.Wallet, len(rows))
	for _, r := range rows {
		wallets[r.ID] = &wallet.Wallet{
			ID: r.ID, Currency: r.Currency, Balance: r.Balance, Held: r.Held, AllowNegative: r.AllowNegative,
			Limits:      wallet.Limits{MinBalance: r.MinBalance, MaxBalance: r.MaxBalance},
			ForcedDebit: r.ForcedDebit, Owner: ownerOf(r.Owner),
		}
	}
	return wallets
}

// ownerOf is a wallet's owner as the domain names it: "" for the platform's.
func ownerOf(owner *string) string {
	if owner == nil {
		return ""
	}
	return *owner
}

// GetTransfer returns the transfer with this id and where its event is; for an owner, a
// transfer neither from nor to one of its wallets is not found.
func (s *Store) GetTransfer(ctx context.Context, id uuid.UUID) (wallet.Transfer, error) {
	row, err := s.queries.GetTransferWithOutbox(ctx, walletdb.GetTransferWithOutboxParams{ID: id, Owner: wallet.ActorOf(ctx).OwnerFilter()})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.Transfer{}, problem.Newf(wallet.ErrTransferNotFound, "transfer %s does not exist", id)
	case err != nil:
		return wallet.Transfer{}, fmt.Errorf("get transfer %s: %w", id, err)
	}
	t := toTransfer(row.Transfer, row.OutboxStatus)
	if t.IsReversal() {
		return t, nil
	}
	if t.Reversals, err = s.reversals(ctx, id); err != nil {
		return wallet.Transfer{}, err
	}
	return t, nil
}

// TransferByIdempotencyKey returns the transfer the key created and where its event is.
func (s *Store) TransferByIdempotencyKey(ctx context.Context, key string) (wallet.Transfer, error) {
	row, err := s.queries.GetTransferByIdempotencyKey(ctx, walletdb.GetTransferByIdempotencyKeyParams{
		IdempotencyOwner: wallet.ActorOf(ctx).Owner, IdempotencyKey: key,
	})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return wallet.Transfer{}, problem.Newf(wallet.ErrTransferNotFound, "no transfer has the Idempotency-Key %q", key)
	case err != nil:
		return wallet.Transfer{}, fmt.Errorf("get transfer by idempotency key: %w", err)
	}
	return toTransfer(row.Transfer, row.OutboxStatus), nil
}

// pageLimit brings a listing's limit into 1..wallet.MaxListLimit (0 means
// wallet.DefaultListLimit).
func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return wallet.DefaultListLimit
	case limit > wallet.MaxListLimit:
		return wallet.MaxListLimit
	}
	return limit
}

// ListTransfers returns up to q.Limit transfers after the cursor, oldest first: those from or
// to q.WalletID, and those of q.Reference, when set. A limit out of range is brought into
// 1..wallet.MaxListLimit (0 means wallet.DefaultListLimit). A cursor that names no transfer
// the actor may see is wallet.ErrInvalidCursor.
func (s *Store) ListTransfers(ctx context.Context, q wallet.TransferQuery) (wallet.Page, error) {
	if err := q.Validate(); err != nil {
		return wallet.Page{}, err
	}
	owner := wallet.ActorOf(ctx).OwnerFilter()
	if err := s.checkTransferCursor(ctx, q.After, owner); err != nil {
		return wallet.Page{}, err
	}
	limit := pageLimit(q.Limit)
	rows, err := s.listTransferRows(ctx, q, owner, int32(limit+1)) // one more: is there a next page?
	if err != nil {
		return wallet.Page{}, fmt.Errorf("list transfers: %w", interpretError(err))
	}
	return transferPage(rows, limit, func(r walletdb.ListTransfersRow) wallet.Transfer { return toTransfer(r.Transfer, r.OutboxStatus) }), nil
}

// transferPage is a listing's page: its first limit rows as transfers, and Next, the last
// one's cursor, when the query read one row more (there is a next page).
func transferPage[R any](rows []R, limit int, transfer func(R) wallet.Transfer) wallet.Page {
	page := wallet.Page{Transfers: make([]wallet.Transfer, 0, min(len(rows), limit))}
	for _, row := range rows[:min(len(rows), limit)] {
		page.Transfers = append(page.Transfers, transfer(row))
	}
	if len(rows) > limit {
		page.Next = page.Transfers[len(page.Transfers)-1].Cursor()
	}
	return page
}

// listTransferRows runs the listing query that fits q's filters, each bounded by its index.
func (s *Store) listTransferRows(ctx context.Context, q wallet.TransferQuery, owner *string, rowLimit int32) ([]walletdb.ListTransfersRow, error) {
	switch {
	case q.BatchID != uuid.Nil:
		rows, err := s.queries.ListTransfersOfBatch(ctx, walletdb.ListTransfersOfBatchParams{
			BatchID: uuid.NullUUID{UUID: q.BatchID, Valid: true}, Metadata: q.Metadata.JSON(), WalletID: q.WalletID, Reference: q.Reference,
			AfterCreatedAt: q.After.CreatedAt, AfterID: q.After.ID, RowLimit: rowLimit, Owner: owner,
		})
		return convertRows(rows, func(r walletdb.ListTransfersOfBatchRow) walletdb.ListTransfersRow {
			return walletdb.ListTransfersRow(r)
		}), err
	case len(q.Metadata) > 0:
		rows, err := s.queries.ListTransfersByMetadata(ctx, walletdb.ListTransfersByMetadataParams{
			Metadata: q.Metadata.JSON(), WalletID: q.WalletID, Reference: q.Reference,
			AfterCreatedAt: q.After.CreatedAt, AfterID: q.After.ID, RowLimit: rowLimit, Owner: owner,
		})
		return convertRows(rows, func(r walletdb.ListTransfersByMetadataRow) walletdb.ListTransfersRow {
			return walletdb.ListTransfersRow(r)
		}), err
	case q.Reference != "":
		rows, err := s.queries.ListTransfersByReference(ctx, walletdb.ListTransfersByReferenceParams{
			Reference: q.Reference, WalletID: q.WalletID,
			AfterCreatedAt: q.After.CreatedAt, AfterID: q.After.ID, RowLimit: rowLimit, Owner: owner,
		})
		return convertRows(rows, func(r walletdb.ListTransfersByReferenceRow) walletdb.ListTransfersRow {
			return walletdb.ListTransfersRow(r)
		}), err
	case q.WalletID != "":
		rows, err := s.queries.ListTransfersOfWallet(ctx, walletdb.ListTransfersOfWalletParams{
			WalletID:       q.WalletID,
			AfterCreatedAt: q.After.CreatedAt, AfterID: q.After.ID, RowLimit: rowLimit, Owner: owner,
		})
		return convertRows(rows, func(r walletdb.ListTransfersOfWalletRow) walletdb.ListTransfersRow {
			return walletdb.ListTransfersRow(r)
		}), err
	}
	return s.queries.ListTransfers(ctx, walletdb.ListTransfersParams{
		AfterCreatedAt: q.After.CreatedAt, AfterID: q.After.ID, RowLimit: rowLimit, Owner: owner,
	})
}

func convertRows[From, To any](rows []From, convert func(From) To) []To {
	out := make([]To, 0, len(rows))
	for _, r := range rows {
		out = append(out, convert(r))
	}
	return out
}

// checkTransferCursor refuses a cursor that names no transfer owner (nil: anyone) may see at
// the time it says: a listing's cursor names the last transfer of a page it handed out.
func (s *Store) checkTransferCursor(ctx context.Context, after wallet.Cursor, owner *string) error {
	if after.IsZero() {
		return nil
	}
	exists, err := s.queries.TransferCursorExists(ctx, walletdb.TransferCursorExistsParams{
		ID: after.ID, CreatedAt: after.CreatedAt, Owner: owner,
	})
	if err != nil {
		return fmt.Errorf("look up cursor transfer %s: %w", after.ID, interpretError(err))
	}
	if !exists {
		return problem.Newf(wallet.ErrInvalidCursor, "cursor %q names no transfer of this listing", after.String())
	}
	return nil
}

// BalanceTotals returns the sum of all balances per currency, for verification: transfers
// never change it.
func (s *Store) BalanceTotals(ctx context.Context) ([]wallet.CurrencyTotal, error) {
	rows, err := s.queries.BalanceTotals(ctx)
	if err != nil {
		return nil, fmt.Errorf("sum balances: %w", interpretError(err))
	}
	totals := make([]wallet.CurrencyTotal, 0, len(rows))
	for _, r := range rows {
		totals = append(totals, wallet.CurrencyTotal{Currency: r.Currency, Total: r.Total, Wallets: r.Wallets})
	}
	return totals, nil
}

// requestHash fingerprints what a transfer request asks for, so a key that comes back with a
// different request is refused. Each field is length-prefixed: no two requests share an encoding.
func requestHash(req wallet.TransferRequest) []byte {
	h := sha256.New()
	fields := []string{"transfer.v1", req.FromWalletID, req.ToWalletID, strconv.FormatInt(req.Amount, 10), req.Currency}
	if req.Reference != "" { // appended only when given: a request without one hashes as before
		fields = append(fields, "reference", req.Reference)
	}
	fields = append(fields, metadataFields(req.Metadata)...) // likewise: none without metadata
	for _, field := range fields {
		fmt.Fprintf(h, "%d:%s;", len(field), field)
	}
	return h.Sum(nil)
}

func toWallet(w walletdb.Wallet) wallet.Wallet {
	return wallet.Wallet{
		ID: w.ID, Currency: w.Currency, Balance: w.Balance, Held: w.Held,
		AllowNegative: w.AllowNegative, Owner: ownerOf(w.Owner), CreatedAt: w.CreatedAt.UTC(),
		Limits:      wallet.Limits{MinBalance: w.MinBalance, MaxBalance: w.MaxBalance},
		ForcedDebit: w.ForcedDebit, Metadata: mustMetadata(w.Metadata),
	}
}

func toTransfer(t walletdb.Transfer, outboxStatus string) wallet.Transfer {
	return wallet.Transfer{
		ID: t.ID, IdempotencyKey: t.IdempotencyKey,
		FromWalletID: t.FromWalletID, ToWalletID: t.ToWalletID,
		Amount: t.Amount, Currency: t.Currency, Reference: t.Reference, Status: t.Status,
		OutboxStatus: outboxStatus, EventID: t.EventID, CreatedAt: t.CreatedAt.UTC(),
		ReversesTransferID: t.ReversesTransferID.UUID, ReversedAmount: t.ReversedAmount,
		HoldID: t.HoldID.UUID, Metadata: mustMetadata(t.Metadata), Forced: t.Forced,
		BatchID: t.BatchID.UUID, BatchLeg: int(t.BatchLeg.Int32), BatchReversalID: t.BatchReversalID.UUID,
	}
}

// mustMetadata reads a metadata column (of transfers, wallets or holds), a JSON object of
// strings by its check and by what the store writes (metadata.Metadata.JSON): one that does
// not parse is a bug.
func mustMetadata(b []byte) metadata.Metadata {
	m, err := metadata.Parse(b)
	if err != nil {
		panic(fmt.Sprintf("metadata column: %v", err))
	}
	return m
}
