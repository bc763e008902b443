package contract

import (
	"errors"
	"fmt"
	"time"

	"walletgl/internal/metadata"
)

// Hold event types: a two-phase movement. A hold reserves an amount of one wallet
// (its available balance drops, its balance does not); a capture completes it as a transfer
// (written with its own TransferCompleted event in the same transaction) and releases the
// rest; a void, by request or by expiry, releases all of it.
const (
	TypeHoldPlaced   = "HoldPlaced.v1"
	TypeHoldCaptured = "HoldCaptured.v1"
	TypeHoldVoided   = "HoldVoided.v1"
)

// Reasons a hold was voided (HoldVoided.Reason).
const (
	VoidRequested = "requested"
	VoidExpired   = "expired"
)

// HoldPlaced is the wallet's event of a new hold: Amount of WalletID reserved until ExpiresAt.
type HoldPlaced struct {
	HoldID    string    `json:"hold_id"`
	WalletID  string    `json:"wallet_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	ExpiresAt time.Time `json:"expires_at"`
	// Metadata are the client's key-value pairs (internal/metadata), optional: absent when
	// the hold has none, so an event without them reads as before.
	Metadata  metadata.Metadata `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error.
func (h HoldPlaced) Validate() error {
	switch {
	case h.HoldID == "" || h.WalletID == "":
		return Permanent(errors.New("hold_id or wallet_id is empty"))
	case h.Amount <= 0:
		return Permanent(fmt.Errorf("amount %d is not positive", h.Amount))
	case !knownCurrency(h.Currency):
		return Permanent(fmt.Errorf("currency %q is not an ISO 4217 currency code", h.Currency))
	case h.CreatedAt.IsZero() || h.ExpiresAt.IsZero():
		return Permanent(errors.New("created_at or expires_at is missing"))
	}
	if err := h.Metadata.Validate(); err != nil {
		return Permanent(fmt.Errorf("metadata: %w", err))
	}
	return nil
}

// HoldCaptured is the wallet's event of a capture: CapturedAmount of hold HoldID moved from
// its wallet to ToWalletID as transfer TransferID (whose TransferCompleted event the same
// transaction wrote), and the whole held Amount released (Amount − CapturedAmount returns
// to the wallet's available balance).
type HoldCaptured struct {
	HoldID         string    `json:"hold_id"`
	TransferID     string    `json:"transfer_id"`
	WalletID       string    `json:"wallet_id"`
	ToWalletID     string    `json:"to_wallet_id"`
	Amount         int64     `json:"amount"`
	CapturedAmount int64     `json:"captured_amount"`
	Currency       string    `json:"currency"`
	CreatedAt      time.Time `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error.
func (h HoldCaptured) Validate() error {
	switch {
	case h.HoldID == "" || h.TransferID == "" || h.WalletID == "" || h.ToWalletID == "":
		return Permanent(errors.New("hold_id, transfer_id or a wallet id is empty"))
	case h.Amount <= 0 || h.CapturedAmount <= 0 || h.CapturedAmount > h.Amount:
		return Permanent(fmt.Errorf("captured %d of %d: want 0 < captured ≤ held", h.CapturedAmount, h.Amount))
	case !knownCurrency(h.Currency):
		return Permanent(fmt.Errorf("currency %q is not an ISO 4217 currency code", h.Currency))
	case h.CreatedAt.IsZero():
		return Permanent(errors.New("created_at is missing"))
	}
	return nil
}

// HoldVoided is the wallet's event of a void: the whole held Amount of HoldID released,
// because it was asked for (VoidRequested) or the hold expired (VoidExpired).
type HoldVoided struct {
	HoldID    string    `json:"hold_id"`
	WalletID  string    `json:"wallet_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error.
func (h HoldVoided) Validate() error {
	switch {
	case h.HoldID == "" || h.WalletID == "":
		return Permanent(errors.New("hold_id or wallet_id is empty"))
	case h.Amount <= 0:
		return Permanent(fmt.Errorf("amount %d is not positive", h.Amount))
	case !knownCurrency(h.Currency):
		return Permanent(fmt.Errorf("currency %q is not an ISO 4217 currency code", h.Currency))
	case h.Reason != VoidRequested && h.Reason != VoidExpired:
		return Permanent(fmt.Errorf("reason %q is neither %q nor %q", h.Reason, VoidRequested, VoidExpired))
	case h.CreatedAt.IsZero():
		return Permanent(errors.New("created_at is missing"))
	}
	return nil
}
