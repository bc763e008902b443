package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of the hold expiry worker.
const (
	DefaultHoldExpiryInterval = 5 * time.Second
	DefaultHoldExpiryBatch    = 100
)

// HoldExpiryConfig configures a HoldExpiry; zero fields take the defaults.
type HoldExpiryConfig struct {
	Interval time.Duration // between two sweeps
	Batch    int           // most holds voided per transaction
	Log      zerolog.Logger
}

// HoldExpiry voids, with the reason expired, the pending holds whose expiry has passed. A
// capture refuses an expired hold on its own (hold-expired), so the worker's lag only delays
// when the wallet's held drops, never lets an expired hold be captured. Several instances may
// run it at once: each skips the holds another one has locked.
type HoldExpiry struct {
	store *Store
	cfg   HoldExpiryConfig
}

// NewHoldExpiry returns the expiry worker of store's holds; Run runs it.
func NewHoldExpiry(store *Store, cfg HoldExpiryConfig) *HoldExpiry {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultHoldExpiryInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultHoldExpiryBatch
	}
	return &HoldExpiry{store: store, cfg: cfg}
}

// Run sweeps every Interval until ctx is cancelled, then returns nil. A sweep that fails is
// logged and tried again at the next tick: the database may be back by then.
func (e *HoldExpiry) Run(ctx context.Context) error {
	ticker := time.NewTicker(e.cfg.Interval)
	defer ticker.Stop()
	for {
		if n, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Log.Warn().Err(err).Msg("hold expiry sweep failed")
		} else if n > 0 {
			e.cfg.Log.Info().Int("holds", n).Msg("expired holds voided")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Sweep voids every hold expired now, a batch per transaction, and returns how many.
func (e *HoldExpiry) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := e.store.ExpireHolds(ctx, e.cfg.Batch)
		total += n
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return total, nil
			}
			return total, err
		}
		if n < e.cfg.Batch {
			return total, nil
		}
	}
}
