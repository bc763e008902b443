package contract

import (
	"errors"
	"fmt"
	"time"

	"walletgl/internal/metadata"
)

// Batch event types: several transfers (legs) committed together, all or none, and a reversal
// of some or all of a batch's legs, also all or none. Each is one event, so the GL posts each as
// one journal entry carrying every leg's lines, and acknowledges it with one TransferPosted
// naming the batch's (or the batch reversal's) id as its transfer_id.
const (
	// TypeTransferBatchCompleted is the wallet's event of an atomic batch of transfers.
	TypeTransferBatchCompleted = "TransferBatchCompleted.v1"
	// TypeTransferBatchReversed is the wallet's event of a reversal of some or all of a
	// batch's legs, each in full.
	TypeTransferBatchReversed = "TransferBatchReversed.v1"
)

// MaxBatchLegs bounds the legs of a batch (and so the lines of its GL entry and the size of its
// event: about 300 bytes of JSON a leg).
const MaxBatchLegs = 100

// BatchLeg is one transfer of a batch: the same fields as a TransferCompleted.v2, without its
// metadata (the batch's metadata is the legs' metadata) and its time (the batch's).
type BatchLeg struct {
	TransferID   string `json:"transfer_id"`
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Kind         string `json:"kind"`
	Reference    string `json:"reference,omitempty"`
}

// TransferBatchCompleted is the wallet's event of a batch: every leg committed in one
// transaction. Legs may be in different currencies, each leg within one.
type TransferBatchCompleted struct {
	BatchID   string            `json:"batch_id"`
	Transfers []BatchLeg        `json:"transfers"`
	Metadata  metadata.Metadata `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error: each leg is checked
// as a TransferCompleted.v2 would be, and no id appears twice (the batch's id included).
func (b TransferBatchCompleted) Validate() error {
	if b.BatchID == "" {
		return Permanent(errors.New("batch_id is empty"))
	}
	if len(b.Transfers) == 0 || len(b.Transfers) > MaxBatchLegs {
		return Permanent(fmt.Errorf("batch %s has %d legs, want 1 to %d", b.BatchID, len(b.Transfers), MaxBatchLegs))
	}
	if err := b.Metadata.Validate(); err != nil {
		return Permanent(fmt.Errorf("metadata: %w", err))
	}
	seen := map[string]bool{b.BatchID: true}
	for i, leg := range b.Transfers {
		if seen[leg.TransferID] {
			return Permanent(fmt.Errorf("leg %d: transfer_id %q appears twice in batch %s", i, leg.TransferID, b.BatchID))
		}
		seen[leg.TransferID] = true
		if leg.Kind != KindDeposit && leg.Kind != KindTransfer && leg.Kind != KindWithdrawal {
			return Permanent(fmt.Errorf("leg %d: kind %q is not deposit, transfer or withdrawal", i, leg.Kind))
		}
		if err := leg.AsTransfer(b.CreatedAt).Validate(); err != nil {
			return fmt.Errorf("leg %d: %w", i, err)
		}
	}
	return nil
}

// AsTransfer is the leg as the TransferCompleted.v2 it would be on its own, at the batch's time.
func (l BatchLeg) AsTransfer(createdAt time.Time) TransferCompleted {
	return TransferCompleted{
		TransferID: l.TransferID, FromWalletID: l.FromWalletID, ToWalletID: l.ToWalletID,
		Amount: l.Amount, Currency: l.Currency, Kind: l.Kind, Reference: l.Reference,
		CreatedAt: createdAt,
	}
}

// BatchLegReversal is one leg of a batch reversal: leg TransferID reversed in full (Amount is
// the leg's amount) as the reversal ReversalID, from the leg's receiver back to its sender.
type BatchLegReversal struct {
	ReversalID   string `json:"reversal_id"`
	TransferID   string `json:"transfer_id"`
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
}

// TransferBatchReversed is the wallet's event of a batch reversal: the chosen legs of batch
// BatchID (all of them unless the client chose) reversed in full, together, in one transaction.
type TransferBatchReversed struct {
	BatchReversalID string             `json:"batch_reversal_id"`
	BatchID         string             `json:"batch_id"`
	Reversals       []BatchLegReversal `json:"reversals"`
	Metadata        metadata.Metadata  `json:"metadata,omitempty"`
	CreatedAt       time.Time          `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error.
func (b TransferBatchReversed) Validate() error {
	if b.BatchReversalID == "" || b.BatchReversalID == b.BatchID {
		return Permanent(fmt.Errorf("batch_reversal_id %q is empty or the batch's own id", b.BatchReversalID))
	}
	if b.BatchID == "" {
		return Permanent(errors.New("batch_id is empty"))
	}
	if len(b.Reversals) == 0 || len(b.Reversals) > MaxBatchLegs {
		return Permanent(fmt.Errorf("batch reversal %s has %d legs, want 1 to %d", b.BatchReversalID, len(b.Reversals), MaxBatchLegs))
	}
	if err := b.Metadata.Validate(); err != nil {
		return Permanent(fmt.Errorf("metadata: %w", err))
	}
	seen := map[string]bool{b.BatchID: true, b.BatchReversalID: true}
	for i, r := range b.Reversals {
		if seen[r.ReversalID] || seen[r.TransferID] {
			return Permanent(fmt.Errorf("leg %d: reversal %q or transfer %q appears twice in batch reversal %s", i, r.ReversalID, r.TransferID, b.BatchReversalID))
		}
		seen[r.ReversalID], seen[r.TransferID] = true, true
		leg := TransferReversed{
			ReversalID: r.ReversalID, TransferID: r.TransferID, FromWalletID: r.FromWalletID,
			ToWalletID: r.ToWalletID, Amount: r.Amount, Currency: r.Currency, CreatedAt: b.CreatedAt,
		}
		if err := leg.Validate(); err != nil {
			return fmt.Errorf("leg %d: %w", i, err)
		}
	}
	return nil
}
