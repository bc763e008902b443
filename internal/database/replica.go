package database

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultReplicaMaxStaleness is how far behind the primary a replica may be and still answer a
// read (GL_READ_MAX_STALENESS).
const DefaultReplicaMaxStaleness = 5 * time.Second

// Why a replica does not answer a read: further behind than the bound (or by more than can be
// told), or not a standby at all (the read URL reached a primary, as prefer-standby does when
// no standby is up: its reads go to GL_DATABASE_URL's pool instead).
var (
	ErrReplicaBehind = errors.New("replica further behind the primary than the bound")
	ErrNotStandby    = errors.New("the read database is not a standby")
)

// Replica measures how far a replica is behind its primary, on one clock: the service's.
//
// Every SampleInterval it reads the primary's WAL flush position (everything committed up to
// then lies at or before it) and notes when it asked. A replica that has replayed up to a
// sample's position holds everything committed before that sample was taken: it is at most as
// old as the newest such sample. This holds on an idle primary, where the replay timestamp
// (pg_last_xact_replay_timestamp) only says when the last transaction was, and across hosts
// whose clocks disagree, since the two servers' clocks are never compared. The answer is an
// upper bound, coarse by one SampleInterval.
type Replica struct {
	primary, read *pgxpool.Pool
	max           time.Duration
	mu            sync.Mutex
	samples       []lsnSample // oldest first
}

type lsnSample struct {
	at  time.Time // before the question was sent: the sample is at least this fresh
	lsn int64
}

// NewReplica measures the replica that read reaches against the primary that primary reaches,
// and allows reads from it while it is at most maxStaleness behind.
func NewReplica(primary, read *pgxpool.Pool, maxStaleness time.Duration) *Replica {
	return &Replica{primary: primary, read: read, max: maxStaleness}
}

// SampleInterval is how often Run samples the primary: a tenth of the bound (at least 50ms, at
// most a second), the coarseness of the staleness a read reports.
func (r *Replica) SampleInterval() time.Duration {
	return min(max(r.max/10, 50*time.Millisecond), time.Second)
}

// Run samples the primary's position until ctx ends. A primary that does not answer leaves the
// samples to age: reads then go to the primary, or fail there as they would without a replica.
func (r *Replica) Run(ctx context.Context) error {
	t := time.NewTicker(r.SampleInterval())
	defer t.Stop()
	for {
		// A failed sample is not fatal: the replica's reads age past the bound and move to
		// the primary, and a later sample, once it answers, brings them back.
		_ = r.Sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sample reads the primary's WAL flush position once.
func (r *Replica) Sample(ctx context.Context) error {
	at := time.Now()
	var lsn int64
	if err := r.primary.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::int8").Scan(&lsn); err != nil {
		return fmt.Errorf("sample the primary's wal position: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, lsnSample{at: at, lsn: lsn})
	// Keep what can still answer within the bound, and the newest sample older than that.
	keep := 0
	for keep < len(r.samples)-1 && at.Sub(r.samples[keep+1].at) > r.max {
		keep++
	}
	r.samples = r.samples[keep:]
	return nil
}

// Staleness measures the replica now: at most how far behind the primary it is. An error says
// it must not answer: ErrReplicaBehind, ErrNotStandby, or a replica that does not answer.
func (r *Replica) Staleness(ctx context.Context) (time.Duration, error) {
	var standby bool
	var replayed *int64
	err := r.read.QueryRow(ctx,
		"SELECT pg_is_in_recovery(), pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::int8").Scan(&standby, &replayed)
	if err != nil {
		return 0, fmt.Errorf("measure the replica's replay position: %w", err)
	}
	if !standby {
		return 0, ErrNotStandby
	}
	if replayed == nil { // a server in recovery from an archive, not streaming
		return 0, fmt.Errorf("replay position unknown: %w", ErrReplicaBehind)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.samples) - 1; i >= 0; i-- {
		s := r.samples[i]
		if s.lsn > *replayed {
			continue
		}
		staleness := now.Sub(s.at)
		if staleness > r.max {
			return 0, fmt.Errorf("replica at most %s behind, the bound is %s: %w", staleness.Round(time.Millisecond), r.max, ErrReplicaBehind)
		}
		return staleness, nil
	}
	return 0, fmt.Errorf("replica behind every sample of the last %s: %w", r.max, ErrReplicaBehind)
}

// Health reports a replica that cannot answer reads now (for /readyz, as a warning: reads go to
// the primary meanwhile).
func (r *Replica) Health(ctx context.Context) error {
	_, err := r.Staleness(ctx)
	return err
}
