package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/gl/postgres/internal/gldb"
)

// CheckpointPolicy is when serve takes a balance checkpoint: once Lines lines were posted after
// the latest one (and at least checkpointLinesPerRow for each row it writes), or once the
// latest is Interval old and a line was posted since, whichever comes first. It looks every
// second (every Interval when that is shorter). A read adds to the latest checkpoint only the
// lines after it, so Lines bounds what a read sums (a second's lines when more are posted in a
// second), and Interval how long a quiet ledger goes without one (a checkpoint is a row per
// account and currency: taking one for every few lines would outgrow the ledger).
type CheckpointPolicy struct {
	Interval time.Duration // GL_CHECKPOINT_INTERVAL
	Lines    int64         // GL_CHECKPOINT_LINES
}

// The default checkpoint policy (GL_CHECKPOINT_INTERVAL, GL_CHECKPOINT_LINES): at 1,000
// entries/s, about the whole pipeline's rate on the 2-core machine, a checkpoint every second;
// a read adds 2,000–4,000 lines with the second a checkpoint stays behind
// (docs/gl.md#balance-checkpoints, docs/bench.md).
const (
	DefaultCheckpointInterval = 5 * time.Second
	DefaultCheckpointLines    = 2_000
)

// checkpointPoll is how often serve looks whether a checkpoint is due.
const checkpointPoll = time.Second

// checkpointLinesPerRow: a checkpoint taken for its lines covers at least this many for each
// row it writes (an account and currency of the latest checkpoint), so that on a large chart of
// accounts a checkpoint's rows stay within a twentieth of the lines it covers; below that, only
// the interval takes one, as before the line threshold.
const checkpointLinesPerRow = 20

// Checkpoint takes a balance checkpoint (db/schema/gl/00004) now: the totals of every account
// and currency up to a second before the oldest transaction open in the database. It reports
// the checkpoint's time, or false when there was nothing new to total (or another instance took
// a later one).
func (l *Ledger) Checkpoint(ctx context.Context) (time.Time, bool, error) {
	return l.CheckpointIfDue(ctx, CheckpointPolicy{}) // no interval: due with any line
}

// CheckpointIfDue takes a balance checkpoint as Checkpoint does when p says one is due, and
// reports false when it is not. Two statements on purpose: the bound is read first, so that the
// totals' snapshot, taken by the second statement, holds every transaction that was not open at
// the first.
func (l *Ledger) CheckpointIfDue(ctx context.Context, p CheckpointPolicy) (time.Time, bool, error) {
	through, err := l.queries.CheckpointBound(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("balance checkpoint bound: %w", interpretError(err))
	}
	n, err := l.queries.TakeBalanceCheckpoint(ctx, gldb.TakeBalanceCheckpointParams{
		Through: through, MinLines: max(p.Lines, 1), LinesPerRow: checkpointLinesPerRow, StaleBefore: through.Add(-p.Interval),
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("balance checkpoint through %s: %w", through.Format(time.RFC3339Nano), interpretError(err))
	}
	return through, n > 0, nil
}

// RunCheckpoints takes a balance checkpoint whenever p says one is due until ctx is done. A
// failed one is logged and tried again at the next look: reads stay correct without
// checkpoints, only slower.
func (l *Ledger) RunCheckpoints(ctx context.Context, p CheckpointPolicy, log zerolog.Logger) error {
	log = log.With().Str("component", "checkpoints").Logger()
	ticker := time.NewTicker(min(checkpointPoll, p.Interval))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		through, taken, err := l.CheckpointIfDue(ctx, p)
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
