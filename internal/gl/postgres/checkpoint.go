package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// DefaultCheckpointInterval is how often serve takes a balance checkpoint: a read then adds at
// most about this long's lines (and the second a checkpoint stays behind) to the latest
// checkpoint. Every 5 s a trial balance stays under 10 ms at 1,000 entries/s (docs/bench.md).
const DefaultCheckpointInterval = 5 * time.Second

// Checkpoint takes a balance checkpoint (db/schema/gl/00004): the totals of every account and
// currency up to a second before the oldest transaction open in the database. It reports the
// checkpoint's time, or false when there was nothing new to total (or another instance took a
// later one). Two statements on purpose: the bound is read first, so that the totals' snapshot,
// taken by the second statement, holds every transaction that was not open at the first.
func (l *Ledger) Checkpoint(ctx context.Context) (time.Time, bool, error) {
	through, err := l.queries.CheckpointBound(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("balance checkpoint bound: %w", interpretError(err))
	}
	n, err := l.queries.TakeBalanceCheckpoint(ctx, through)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("balance checkpoint through %s: %w", through.Format(time.RFC3339Nano), interpretError(err))
	}
	return through, n > 0, nil
}

// RunCheckpoints takes a balance checkpoint every interval until ctx is done. A failed one is
// logged and tried again at the next tick: reads stay correct without checkpoints, only
// slower.
func (l *Ledger) RunCheckpoints(ctx context.Context, interval time.Duration, log zerolog.Logger) error {
	log = log.With().Str("component", "checkpoints").Logger()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		through, taken, err := l.Checkpoint(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn().Err(err).Msg("balance checkpoint failed; reads add more lines until the next one")
		case taken:
			log.Debug().Time("through", through).Msg("balance checkpoint")
		}
	}
}
