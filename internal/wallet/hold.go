package wallet

import (
	"context"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/metadata"
	"walletgl/internal/problem"
)

// Hold statuses: a hold is placed pending and finishes once, captured or voided. The words are
// stable: the API shows them.
const (
	HoldPending  = "pending"
	HoldCaptured = "captured"
	HoldVoided   = "voided"
)

// Reasons a hold was voided (the same words as contract.VoidRequested and contract.VoidExpired).
const (
	VoidRequested = "requested"
	VoidExpired   = "expired"
)

// Hold limits on its lifetime: at least a second, at most MaxHoldLifetime.
const (
	DefaultHoldLifetime = 7 * 24 * time.Hour
	MaxHoldLifetime     = 30 * 24 * time.Hour
)

// Hold reserves Amount of a wallet until ExpiresAt: the wallet's Held includes it and its
// Available excludes it while it is pending. A capture moves CapturedAmount (at most Amount)
// to a wallet as transfer CaptureTransferID and releases the rest; a void releases it all.
type Hold struct {
	ID                uuid.UUID
	IdempotencyKey    string
	WalletID          string
	Amount            int64
	Currency          string
	Status            string
	VoidReason        string // "" unless voided
	ExpiresAt         time.Time
	CapturedAmount    int64     // 0 unless captured
	CaptureTransferID uuid.UUID // uuid.Nil unless captured
	ToWalletID        string    // the capture's receiver; "" unless captured
	// Metadata are the client's key-value pairs (empty when none were given), carried by
	// HoldPlaced.v1 and copied to the capture's transfer.
	Metadata   metadata.Metadata
	CreatedAt  time.Time
	FinishedAt time.Time // zero while pending
	// PlacedEventID is the id of its HoldPlaced.v1 outbox row, FinishedEventID that of its
	// HoldCaptured.v1 or HoldVoided.v1 (uuid.Nil while pending).
	PlacedEventID   uuid.UUID
	FinishedEventID uuid.UUID
}

// Expired reports whether h is pending past its expiry at now: the expiry worker has not voided
// it yet, but it can no longer be captured.
func (h Hold) Expired(now time.Time) bool { return h.Status == HoldPending && !now.Before(h.ExpiresAt) }

// HoldRequest asks to reserve Amount of WalletID until ExpiresAt, or for ExpiresIn from when
// it is placed (one of the two; neither: DefaultHoldLifetime). Currency, when given, must be
// the wallet's. The IdempotencyKey works as a transfer's, in a key space of holds.
type HoldRequest struct {
	IdempotencyKey string
	WalletID       string
	Amount         int64
	Currency       string // "" means the wallet's currency
	ExpiresAt      time.Time
	ExpiresIn      time.Duration
	// Metadata are the client's key-value pairs, optional; part of the request, as a
	// transfer's.
	Metadata metadata.Metadata
	KeyID    uuid.UUID // the API key that asks (uuid.Nil: none), as in TransferRequest
}

// Validate reports why r can never succeed, whatever the state of the wallet, at now.
func (r HoldRequest) Validate(now time.Time) error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if err := validateWalletID("wallet_id", r.WalletID); err != nil {
		return err
	}
	if r.Amount <= 0 || r.Amount > MaxAmount {
		return problem.Newf(ErrInvalid, "amount must be a whole number of minor units from 1 to %d, got %d", int64(MaxAmount), r.Amount)
	}
	if r.Currency != "" {
		if err := validateCurrency(r.Currency); err != nil {
			return err
		}
	}
	if err := r.Metadata.Validate(); err != nil {
		return err
	}
	if !r.ExpiresAt.IsZero() && r.ExpiresIn != 0 {
		return problem.Newf(ErrInvalid, "give expires_at or expires_in, not both")
	}
	if at := r.Expiry(now); at.Before(now.Add(time.Second)) || at.After(now.Add(MaxHoldLifetime)) {
		return problem.Newf(ErrInvalid, "a hold expires from 1 s to %s after it is placed", MaxHoldLifetime)
	}
	return nil
}

// Expiry is when a hold placed at now by r expires.
func (r HoldRequest) Expiry(now time.Time) time.Time {
	switch {
	case !r.ExpiresAt.IsZero():
		return r.ExpiresAt
	case r.ExpiresIn != 0:
		return now.Add(r.ExpiresIn)
	}
	return now.Add(DefaultHoldLifetime)
}

// CaptureRequest asks to complete a pending hold: Amount (0: the whole hold) moves to
// ToWalletID as a transfer, the rest is released. Its IdempotencyKey is the transfer's (one
// key space with transfers and reversals).
type CaptureRequest struct {
	IdempotencyKey string
	HoldID         uuid.UUID
	ToWalletID     string
	Amount         int64     // 0: the whole hold
	KeyID          uuid.UUID // the API key that asks (uuid.Nil: none)
}

// Validate reports why r can never succeed, whatever the state of the hold and wallets.
func (r CaptureRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if err := validateWalletID("to_wallet_id", r.ToWalletID); err != nil {
		return err
	}
	if r.Amount < 0 || r.Amount > MaxAmount {
		return problem.Newf(ErrInvalid, "amount must be a whole number of minor units from 1 to %d, got %d", int64(MaxAmount), r.Amount)
	}
	return nil
}

// HoldService is the holds' part of the service; postgres.Store implements it.
type HoldService interface {
	// PlaceHold reserves the amount, or returns the hold an earlier request with the same key
	// placed (replayed is then true).
	PlaceHold(ctx context.Context, req HoldRequest) (h Hold, replayed bool, err error)
	// GetHold returns the hold with this id.
	GetHold(ctx context.Context, id uuid.UUID) (Hold, error)
	// CaptureHold completes a pending hold as a transfer, or returns the hold an earlier
	// capture with the same key captured (replayed is then true).
	CaptureHold(ctx context.Context, req CaptureRequest) (h Hold, replayed bool, err error)
	// VoidHold releases a pending hold; a hold already voided is returned as it is.
	VoidHold(ctx context.Context, id uuid.UUID) (Hold, error)
	// ListHolds returns a page of the holds q asks for, oldest first (GET /v1/holds, which
	// the GL's reconcile reads).
	ListHolds(ctx context.Context, q HoldQuery) (HoldPage, error)
}

// HoldQuery asks for one page of the hold list: up to Limit holds after the cursor, those
// whose metadata holds every pair of Metadata when set.
type HoldQuery struct {
	After    Cursor
	Limit    int
	Metadata metadata.Metadata // empty: any metadata
}

// HoldPage is one page of holds, paged like transfers (Page).
type HoldPage struct {
	Holds []Hold
	// Next is where the following page starts; the zero Cursor when this page is the last.
	Next Cursor
}

// Cursor is where a listing after h starts.
func (h Hold) Cursor() Cursor { return Cursor{CreatedAt: h.CreatedAt, ID: h.ID} }

// ParseHoldID parses a hold id from a client; an id that is not a UUID names no hold.
func ParseHoldID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, problem.Newf(ErrHoldNotFound, "hold %q does not exist", s)
	}
	return id, nil
}
