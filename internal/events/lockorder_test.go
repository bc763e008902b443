package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/internal/eventsdb"
)

// The relay's marks and the consuming service's acknowledgments change the same outbox rows at
// once. Each statement locks its rows in id order, so neither can hold a row the other locks
// first while it waits for one: two such statements cannot deadlock (before, they did, until
// PostgreSQL's deadlock_timeout broke the tie a second later). Each case holds the lower row,
// starts one statement on both rows given in the opposite order, and checks that the higher row
// is still free for the other statement.
func TestOutboxMarksAndAcknowledgmentsLockRowsInIDOrder(t *testing.T) {
	t.Parallel()
	const owner = "relay-under-test"
	cases := map[string]struct {
		waiting func(ctx context.Context, q *eventsdb.Queries, ids []uuid.UUID) error // runs on [high, low]
		free    func(ctx context.Context, q *eventsdb.Queries, id uuid.UUID) error    // runs on high
	}{
		"a mark waiting leaves the next row to an acknowledgment": {
			waiting: func(ctx context.Context, q *eventsdb.Queries, ids []uuid.UUID) error {
				_, err := q.MarkDispatched(ctx, eventsdb.MarkDispatchedParams{Owner: owner, Ids: ids, Seqs: []int64{1, 2}, Dups: []int32{0, 0}})
				return err
			},
			free: func(ctx context.Context, q *eventsdb.Queries, id uuid.UUID) error {
				_, err := q.AcknowledgeOutbox(ctx, []uuid.UUID{id})
				return err
			},
		},
		"an acknowledgment waiting leaves the next row to a mark": {
			waiting: func(ctx context.Context, q *eventsdb.Queries, ids []uuid.UUID) error {
				_, err := q.AcknowledgeOutbox(ctx, ids)
				return err
			},
			free: func(ctx context.Context, q *eventsdb.Queries, id uuid.UUID) error {
				_, err := q.MarkDispatched(ctx, eventsdb.MarkDispatchedParams{Owner: owner, Ids: []uuid.UUID{id}, Seqs: []int64{3}, Dups: []int32{0}})
				return err
			},
		},
		"a release waiting leaves the next row to an acknowledgment": {
			waiting: func(ctx context.Context, q *eventsdb.Queries, ids []uuid.UUID) error {
				_, err := q.ReleaseOutbox(ctx, eventsdb.ReleaseOutboxParams{Owner: owner, Ids: ids})
				return err
			},
			free: func(ctx context.Context, q *eventsdb.Queries, id uuid.UUID) error {
				_, err := q.AcknowledgeOutbox(ctx, []uuid.UUID{id})
				return err
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			q := eventsdb.New(b.pool)
			// Enough rows that the planner reads the two by the primary key, in whatever order
			// the statement hands them over, rather than the whole table in its physical order.
			b.addEvents(t, 2000)
			_, err := b.pool.Exec(ctx, "UPDATE outbox SET status = 'acknowledged', acknowledged_at = clock_timestamp()")
			require.NoError(t, err)
			ids := b.addEvents(t, 2) // uuid v7: ids[0] < ids[1]
			claimed, err := q.ClaimOutbox(ctx, eventsdb.ClaimOutboxParams{Owner: owner, LeaseSeconds: 60, MaxAttempts: 10, BatchSize: 2})
			require.NoError(t, err)
			require.Len(t, claimed, 2)

			holder, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = holder.Rollback(ctx) }()
			_, err = holder.Exec(ctx, "SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE", ids[0])
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() { done <- c.waiting(ctx, q, []uuid.UUID{ids[1], ids[0]}) }()
			require.Eventually(t, func() bool {
				var waiting int
				err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
				return err == nil && waiting == 1
			}, 10*time.Second, 5*time.Millisecond, "the statement waits for the lower row")

			err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '2s'"); err != nil {
					return err
				}
				return c.free(ctx, eventsdb.New(tx), ids[1])
			})
			require.NoError(t, err, "the higher row is not locked by the waiting statement")

			require.NoError(t, holder.Rollback(ctx))
			select {
			case err := <-done:
				require.NoError(t, err, "the waiting statement ends once the lower row is free")
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting statement did not end")
			}
		})
	}
}
