package wallet

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
	"walletgl/internal/metadata"
	"walletgl/internal/problem"
)

// Atomic batches: several transfers (legs) moved together, all or none, in one transaction,
// with one event (TransferBatchCompleted.v1) for the GL to post as one entry. A batch is
// reversed with a batch reversal, which reverses some or all of its legs in full, again all or
// none, with one event (TransferBatchReversed.v1). A leg is a transfer of its own (GET
// /v1/transfers/{id}, with its BatchID) but is never reversed alone.

// The errors of batches; every other refusal of a leg keeps its own type and status.
var (
	ErrBatchNotFound   = problem.New(problem.NotFound, "batch-not-found", "the transfer batch does not exist")
	ErrTransferInBatch = problem.New(problem.Conflict, "transfer-in-batch",
		"the transfer is a leg of a batch; reverse it with its batch (POST /v1/transfer-batches/{id}/reversals)")
)

// LegError is the refusal of a request because of one of its legs: Leg is the leg's index in
// the request's transfers (0-based), and Err's detail names it too. The HTTP API adds Leg to the
// problem as the extension member "leg".
type LegError struct {
	Leg int
	Err *problem.Error
}

func (e *LegError) Error() string { return e.Err.Error() }

// Unwrap is the leg's problem, so that errors.Is and errors.As see it.
func (e *LegError) Unwrap() error { return e.Err }

// legInput refuses leg i's field with err: 400s name the field as a JSON pointer.
func legInput(i int, field string, err error) error {
	var p *problem.Error
	if !errors.As(err, &p) {
		return err
	}
	return &LegError{Leg: i, Err: &problem.Error{Kind: p.Kind, Slug: p.Slug, Detail: fmt.Sprintf("/transfers/%d/%s: %s", i, field, p.Detail)}}
}

// legRefusal refuses leg i with err: the rules' refusals name the leg by its index.
func legRefusal(i int, err error) error {
	var p *problem.Error
	if !errors.As(err, &p) {
		return err
	}
	return &LegError{Leg: i, Err: &problem.Error{Kind: p.Kind, Slug: p.Slug, Detail: fmt.Sprintf("leg %d: %s", i, p.Detail)}}
}

// BatchLegRequest is one transfer a batch asks for.
type BatchLegRequest struct {
	FromWalletID string
	ToWalletID   string
	Amount       int64
	Currency     string
	Reference    string // optional, as a transfer's
}

// asTransfer is the leg as a transfer request, for the rules.
func (l BatchLegRequest) asTransfer(key string, keyID uuid.UUID) TransferRequest {
	return TransferRequest{
		IdempotencyKey: key, FromWalletID: l.FromWalletID, ToWalletID: l.ToWalletID,
		Amount: l.Amount, Currency: l.Currency, Reference: l.Reference, KeyID: keyID,
	}
}

// BatchRequest asks for an atomic batch of 1 to contract.MaxBatchLegs transfers. Its
// Idempotency-Key lives in a key space of its own (batches): the same key and request answer
// the first batch again; the key is free again after a refusal (a refused batch writes nothing).
type BatchRequest struct {
	IdempotencyKey string
	Legs           []BatchLegRequest
	// Metadata are the batch's, carried by each of its legs.
	Metadata metadata.Metadata
	KeyID    uuid.UUID // the API key that asks, as in TransferRequest
}

// Validate reports why r can never succeed, whatever the state of the wallets: a refusal of a
// leg is a LegError.
func (r BatchRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if len(r.Legs) == 0 || len(r.Legs) > contract.MaxBatchLegs {
		return problem.Newf(ErrInvalid, "/transfers: a batch has 1 to %d transfers, got %d", contract.MaxBatchLegs, len(r.Legs))
	}
	if err := r.Metadata.Validate(); err != nil {
		return err
	}
	for i, l := range r.Legs {
		if err := l.validate(i); err != nil {
			return err
		}
	}
	return nil
}

func (l BatchLegRequest) validate(i int) error {
	if err := validateWalletID("from_wallet_id", l.FromWalletID); err != nil {
		return legInput(i, "from_wallet_id", err)
	}
	if err := validateWalletID("to_wallet_id", l.ToWalletID); err != nil {
		return legInput(i, "to_wallet_id", err)
	}
	if l.Amount <= 0 || l.Amount > MaxAmount {
		return legInput(i, "amount", problem.Newf(ErrInvalid, "amount must be a whole number of minor units from 1 to %d, got %d", int64(MaxAmount), l.Amount))
	}
	if err := validateCurrency(l.Currency); err != nil {
		return legInput(i, "currency", err)
	}
	if n := utf8.RuneCountInString(l.Reference); n > contract.MaxReferenceLength || !utf8.ValidString(l.Reference) {
		return legInput(i, "reference", problem.Newf(ErrInvalid, "reference must be valid UTF-8 of at most %d characters, got %d", contract.MaxReferenceLength, n))
	}
	if l.FromWalletID == l.ToWalletID {
		return legRefusal(i, problem.Newf(ErrSameWallet, "wallet %q cannot transfer to itself", l.FromWalletID))
	}
	return nil
}

// CheckBatch applies the rules of each leg of req, in order, to the wallets locked for it (by
// id; a missing one does not exist) as the legs before it left them: the actor's right to
// debit the from-wallet (CheckDebit) and a transfer's rules (CheckTransfer), limits and holds
// included. It moves the wallets' running balances; the first refusal is a LegError.
func CheckBatch(a Actor, req BatchRequest, wallets map[string]*Wallet) error {
	for i, l := range req.Legs {
		from, to := wallets[l.FromWalletID], wallets[l.ToWalletID]
		if err := CheckDebit(a, "from_wallet_id", from); err != nil {
			return legRefusal(i, err)
		}
		if err := CheckTransfer(l.asTransfer(req.IdempotencyKey, req.KeyID), from, to); err != nil {
			return legRefusal(i, err)
		}
		Move(from, to, l.Amount)
	}
	return nil
}

// Batch is an atomic batch of transfers, as written.
type Batch struct {
	ID             uuid.UUID
	IdempotencyKey string
	Status         string // StatusCompleted: a batch is written only when every leg succeeds
	Legs           []Transfer
	Metadata       metadata.Metadata
	// OutboxStatus is where the batch's event is on its way to the GL (as a transfer's).
	OutboxStatus string
	EventID      uuid.UUID
	CreatedAt    time.Time
	// Reversals are the ids of the batch's reversals, oldest first, where a batch is read
	// alone (GetBatch); nil elsewhere.
	Reversals []uuid.UUID
}

// BatchReversalRequest asks to reverse legs of batch BatchID in full, together: Legs (leg
// transfer ids, each at most once), or every leg when nil. Its Idempotency-Key lives in a key
// space of its own (batch reversals). A batch reversal is never forced.
type BatchReversalRequest struct {
	IdempotencyKey string
	BatchID        uuid.UUID
	Legs           []uuid.UUID
	Metadata       metadata.Metadata
	KeyID          uuid.UUID
}

// Validate reports why r can never succeed, whatever the state of the batch.
func (r BatchReversalRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if r.Legs != nil && (len(r.Legs) == 0 || len(r.Legs) > contract.MaxBatchLegs) {
		return problem.Newf(ErrInvalid, "/transfers: name 1 to %d legs, or leave transfers out to reverse every leg; got %d", contract.MaxBatchLegs, len(r.Legs))
	}
	seen := make(map[uuid.UUID]bool, len(r.Legs))
	for i, id := range r.Legs {
		if seen[id] {
			return &LegError{Leg: i, Err: problem.Newf(ErrInvalid, "/transfers/%d: transfer %s is named twice", i, id)}
		}
		seen[id] = true
	}
	return r.Metadata.Validate()
}

// ChooseLegs is the legs of batch legs (in batch order) that r reverses, in the order it names
// them (every leg when it names none), with the index a refusal names each by: its place in
// r's list, or in the batch when r names none. A leg r names that is not of the batch is
// transfer-not-found.
func (r BatchReversalRequest) ChooseLegs(legs []Transfer) ([]Transfer, []int, error) {
	if r.Legs == nil {
		idx := make([]int, len(legs))
		for i := range legs {
			idx[i] = i
		}
		return legs, idx, nil
	}
	byID := make(map[uuid.UUID]Transfer, len(legs))
	for _, l := range legs {
		byID[l.ID] = l
	}
	chosen := make([]Transfer, len(r.Legs))
	idx := make([]int, len(r.Legs))
	for i, id := range r.Legs {
		l, ok := byID[id]
		if !ok {
			return nil, nil, &LegError{Leg: i, Err: problem.Newf(ErrTransferNotFound, "leg %d: transfer %s is not a leg of batch %s", i, id, r.BatchID)}
		}
		chosen[i], idx[i] = l, i
	}
	return chosen, idx, nil
}

// CheckLegReversal applies the rules of reversing leg (named by index i) in full, to its
// locked wallets as the legs before it left them: the leg is not reversed yet and the money
// may move back (CheckTransfer: the receiver keeps its minimum, the sender its maximum). It
// moves the wallets' running balances; a refusal is a LegError.
func CheckLegReversal(i int, leg Transfer, from, to *Wallet) error {
	if leg.ReversedAmount > 0 {
		return legRefusal(i, problem.Newf(ErrNothingToReverse, "transfer %s of %d %s is reversed already", leg.ID, leg.Amount, leg.Currency))
	}
	move := TransferRequest{FromWalletID: leg.ToWalletID, ToWalletID: leg.FromWalletID, Amount: leg.Amount, Currency: leg.Currency}
	if err := CheckTransfer(move, from, to); err != nil {
		return legRefusal(i, err)
	}
	Move(from, to, leg.Amount)
	return nil
}

// LegRefusal is err, a refusal of leg i, as a LegError naming it.
func LegRefusal(i int, err error) error { return legRefusal(i, err) }

// BatchReversal is a reversal of some or all legs of a batch, each in full.
type BatchReversal struct {
	ID             uuid.UUID
	BatchID        uuid.UUID
	IdempotencyKey string
	Status         string // StatusCompleted
	// Reversals are the reversals of the legs, in the batch's order; each a transfer with
	// ReversesTransferID its leg and BatchReversalID this reversal.
	Reversals    []Transfer
	Metadata     metadata.Metadata
	OutboxStatus string
	EventID      uuid.UUID
	CreatedAt    time.Time
}

// BatchService is the batch half of Service.
type BatchService interface {
	// CreateBatch writes every leg of req, or none, and the batch's event; or returns the
	// batch an earlier request with the same key created (replayed is then true).
	CreateBatch(ctx context.Context, req BatchRequest) (b Batch, replayed bool, err error)
	// GetBatch returns the batch with this id, its legs and its reversals' ids. An owner sees
	// a batch when it may see every one of its legs.
	GetBatch(ctx context.Context, id uuid.UUID) (Batch, error)
	// ReverseBatch reverses the legs req names (all by default) in full, all or none, with one
	// event; or returns the batch reversal an earlier request with the same key created.
	ReverseBatch(ctx context.Context, req BatchReversalRequest) (r BatchReversal, replayed bool, err error)
}

// ParseBatchID parses a batch id from a client; an id that is not a UUID names no batch.
func ParseBatchID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, problem.Newf(ErrBatchNotFound, "transfer batch %q does not exist", s)
	}
	return id, nil
}
