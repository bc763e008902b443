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
// account and currency: taking one for every few lines would outgrow the ledger). Checkpoints
// older than Retention are thinned to the last of each day (UTC); 0 keeps every one.
type CheckpointPolicy struct {
	Interval  time.Duration // GL_CHECKPOINT_INTERVAL
	Lines     int64         // GL_CHECKPOINT_LINES
	Retention time.Duration // GL_CHECKPOINT_RETENTION
}

// The default checkpoint policy (GL_CHECKPOINT_INTERVAL, GL_CHECKPOINT_LINES,
// GL_CHECKPOINT_RETENTION): at 1,000 entries/s, about the whole pipeline's rate on the 2-core
// machine, a checkpoint every second; a read adds 2,000–4,000 lines with the second a
// checkpoint stays behind (docs/gl.md#balance-checkpoints, docs/bench.md). A week of every
// checkpoint serves the recent reads "as of" a time from a checkpoint a second or so before
// it; before that, a day's last checkpoint.
const (
	DefaultCheckpointInterval  = 5 * time.Second
	DefaultCheckpointLines     = 2_000
	DefaultCheckpointRetention = 7 * 24 * time.Hour
)

// checkpointPoll is how often serve looks whether a checkpoint is due.
const checkpointPoll = time.Second

// checkpointLinesPerRow: a checkpoint taken for its lines covers at least this many for each
// row it writes (an account and currency of the latest checkpoint), so that on a large chart of
// accounts a checkpoint's rows stay within a twentieth of the lines it covers; below that, only
// the interval takes one, as before the line threshold.
const checkpointLinesPerRow = 20

// horizonPoll is how often Checkpoint looks whether the transactions its mark waits for have
// ended.
const horizonPoll = 10 * time.Millisecond

// maxPendingMarks bounds the marks serve's worker keeps while a long transaction holds them
// back: it keeps the oldest, which become ready first, and the newest.
const maxPendingMarks = 8

// Thinning deletes checkpointThinBatch rows a statement, at most checkpointThinBatches
// statements a look, so that a backlog (a first start with months of checkpoints) is thinned
// over several looks rather than holding back the next checkpoint.
const (
	checkpointThinBatch   = 1_000
	checkpointThinBatches = 20
)

// checkpointMark is a time a checkpoint may cover once every transaction id below xid has
// ended (db/queries/gl/entries.sql CheckpointMark): until then, a transaction with an earlier
// id may still commit a line posted at or before through.
type checkpointMark struct {
	through time.Time
	xid     int64
}

// mark reads a checkpointMark, and the horizon of its statement's snapshot: every transaction
// id below it had ended.
func (l *Ledger) mark(ctx context.Context) (checkpointMark, int64, error) {
	row, err := l.queries.CheckpointMark(ctx)
	if err != nil {
		return checkpointMark{}, 0, fmt.Errorf("mark balance checkpoint: %w", interpretError(err))
	}
	return checkpointMark{through: row.Through, xid: row.Xid}, row.Horizon, nil
}

// awaitMark waits until every transaction id below m's has ended: a statement after this one
// sees every line posted at or before m.through that will ever commit.
func (l *Ledger) awaitMark(ctx context.Context, m checkpointMark) error {
	for {
		horizon, err := l.queries.CheckpointHorizon(ctx)
		if err != nil {
			return fmt.Errorf("read transaction horizon: %w", interpretError(err))
		}
		if horizon > m.xid {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("await transactions before balance checkpoint through %s: %w", m.through.Format(time.RFC3339Nano), ctx.Err())
		case <-time.After(horizonPoll):
		}
	}
}

// take takes a checkpoint through a ready mark when p says one is due.
func (l *Ledger) take(ctx context.Context, m checkpointMark, p CheckpointPolicy) (bool, error) {
	n, err := l.queries.TakeBalanceCheckpoint(ctx, gldb.TakeBalanceCheckpointParams{
		Through: m.through, MinLines: max(p.Lines, 1), LinesPerRow: checkpointLinesPerRow, StaleBefore: m.through.Add(-p.Interval),
	})
	if err != nil {
		return false, fmt.Errorf("balance checkpoint through %s: %w", m.through.Format(time.RFC3339Nano), interpretError(err))
	}
	return n > 0, nil
}

// Checkpoint takes a balance checkpoint (db/schema/gl/00004) now: the totals of every account
// and currency over the lines posted before the call. It waits until every transaction that
// had an id when it was called has ended (in the whole server), so that none can commit a line
// it covers, whatever pg_stat_activity shows. It reports the checkpoint's time, or false when
// there was nothing new to total (or another instance took a later one).
func (l *Ledger) Checkpoint(ctx context.Context) (time.Time, bool, error) {
	return l.CheckpointIfDue(ctx, CheckpointPolicy{}) // no interval: due with any line
}

// CheckpointIfDue takes a balance checkpoint as Checkpoint does when p says one is due, and
// reports false when it is not.
func (l *Ledger) CheckpointIfDue(ctx context.Context, p CheckpointPolicy) (time.Time, bool, error) {
	m, _, err := l.mark(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	if err := l.awaitMark(ctx, m); err != nil {
		return time.Time{}, false, err
	}
	taken, err := l.take(ctx, m, p)
	return m.through, taken, err
}

// ThinCheckpoints deletes every balance checkpoint taken before keepAfter but its day's last
// (UTC), in small batches, and reports how many rows it deleted. Reads stay exact: any
// checkpoint row is its account's totals up to its time.
func (l *Ledger) ThinCheckpoints(ctx context.Context, keepAfter time.Time) (int64, error) {
	deleted, _, err := l.thin(ctx, time.Time{}, keepAfter, -1)
	return deleted, err
}

// thin deletes the rows ThinCheckpoints does among the checkpoints taken at or after since, at
// most batches statements (negative: as many as it takes), and reports whether it is done.
func (l *Ledger) thin(ctx context.Context, since, keepAfter time.Time, batches int) (int64, bool, error) {
	var deleted int64
	for i := 0; batches < 0 || i < batches; i++ {
		n, err := l.queries.ThinBalanceCheckpoints(ctx, gldb.ThinBalanceCheckpointsParams{
			Since: since, KeepAfter: keepAfter, BatchRows: checkpointThinBatch,
		})
		if err != nil {
			return deleted, false, fmt.Errorf("thin balance checkpoints before %s: %w", keepAfter.Format(time.RFC3339Nano), interpretError(err))
		}
		deleted += n
		if n < checkpointThinBatch {
			return deleted, true, nil
		}
	}
	return deleted, false, nil
}

// checkpointWorker is serve's checkpoint taker: each look reads a new mark and takes a
// checkpoint through the newest earlier mark that is ready, so it never waits on a transaction;
// it then thins the checkpoints past the retention.
type checkpointWorker struct {
	ledger *Ledger
	policy CheckpointPolicy
	marks  []checkpointMark // oldest first, none ready at the last look
	// thinnedBefore: every checkpoint before it is thinned (the start of the day the retention
	// began at the last complete thinning); zero until one completed.
	thinnedBefore time.Time
}

// look takes a checkpoint when one is due through a ready mark, then thins.
func (w *checkpointWorker) look(ctx context.Context) (checkpointMark, bool, int64, error) {
	m, horizon, err := w.ledger.mark(ctx)
	if err != nil {
		return checkpointMark{}, false, 0, err
	}
	ready := -1
	for i, old := range w.marks {
		if old.xid < horizon {
			ready = i
		}
	}
	var use checkpointMark
	if ready >= 0 {
		use = w.marks[ready]
		w.marks = w.marks[ready+1:]
	}
	w.marks = append(w.marks, m)
	if n := len(w.marks); n > maxPendingMarks {
		w.marks = append(w.marks[:n-2], w.marks[n-1])
	}
	var taken bool
	if ready >= 0 {
		if taken, err = w.ledger.take(ctx, use, w.policy); err != nil {
			return use, false, 0, err
		}
	}
	if w.policy.Retention <= 0 {
		return use, taken, 0, nil
	}
	keepAfter := m.through.Add(-w.policy.Retention) // by the database's clock, as the checkpoints
	deleted, done, err := w.ledger.thin(ctx, w.thinnedBefore, keepAfter, checkpointThinBatches)
	if done {
		u := keepAfter.UTC()
		w.thinnedBefore = time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	}
	return use, taken, deleted, err
}

// RunCheckpoints takes a balance checkpoint whenever p says one is due, and thins the
// checkpoints older than p.Retention, until ctx is done. A checkpoint covers the lines posted
// before the previous look, once every transaction that had an id then has ended. A failed
// look is logged and tried again at the next: reads stay correct without checkpoints, only
// slower.
func (l *Ledger) RunCheckpoints(ctx context.Context, p CheckpointPolicy, log zerolog.Logger) error {
	log = log.With().Str("component", "checkpoints").Logger()
	ticker := time.NewTicker(min(checkpointPoll, p.Interval))
	defer ticker.Stop()
	w := &checkpointWorker{ledger: l, policy: p}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		m, taken, deleted, err := w.look(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn().Err(err).Msg("balance checkpoint failed; reads add more lines until the next one")
		}
		if taken {
			log.Debug().Time("through", m.through).Msg("balance checkpoint")
		}
		if deleted > 0 {
			log.Debug().Int64("rows", deleted).Msg("balance checkpoints thinned")
		}
	}
}
