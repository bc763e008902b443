package wallet

import "time"

// DefaultRebuildBatchSize is how many events a rebuild of the wallet's events (wallet outbox
// rebuild) writes per transaction.
const DefaultRebuildBatchSize = 1000

// MaxRebuildBatchSize bounds a rebuild's batch: one transaction, and its rows in memory.
const MaxRebuildBatchSize = 10000

// RebuildRequest asks for the events of the wallet's movements in [Since, Until) to be
// published again under their own ids: each transfer's and capture's TransferCompleted (as
// EventType, v1 or v2: which version a transfer was first published as is not stored), each
// reversal's TransferReversed, each hold's HoldPlaced (at its creation) and HoldCaptured or
// HoldVoided (at its end).
type RebuildRequest struct {
	Since time.Time
	Until time.Time // zero: no end
	// EventType is the transfer event's version, contract.TypeTransferCompleted or
	// contract.TypeTransferCompletedV2 (WALLET_TRANSFER_EVENT_VERSION); with v1, only the
	// deposits go as v1 (contract.TransferEventTypeFor).
	EventType string
	BatchSize int // events per transaction, 1..MaxRebuildBatchSize (0: DefaultRebuildBatchSize)
}

// Rebuilt is the outcome of a rebuild: how many events of the period the wallet's tables hold,
// by type, and what became of their outbox rows.
type Rebuilt struct {
	Since   time.Time        `json:"since"`
	Until   *time.Time       `json:"until,omitempty"` // nil: up to the rebuild's end
	Events  int64            `json:"events"`
	ByType  map[string]int64 `json:"by_type"`
	Batches int              `json:"batches"`
	// Created counts the events whose outbox row retention had deleted: written again pending.
	Created int64 `json:"created"`
	// Republished counts the acknowledged rows sent back to pending.
	Republished int64 `json:"republished"`
	// Left counts the rows still on their way (pending, dispatching, dispatched, failed,
	// dead_letter), left as they are.
	Left int64 `json:"left"`
}
