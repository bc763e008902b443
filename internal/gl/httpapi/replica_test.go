//go:build slow

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/database"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metrics"
	"walletgl/internal/systemtest"
	"walletgl/internal/web/webtest"
)

// The GL's reads are served by a real streaming replica (a hot standby of a primary of the
// test's own) while it is within the bound, each saying so; a replica whose replay is paused
// falls behind, and the reads go to the primary until it catches up again.
func TestReadsFromStreamingReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	primary, err := systemtest.StartCluster(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = primary.Stop(ctx, false) })
	primaryURL := primary.DatabaseURL("gl")
	require.NoError(t, database.EnsureExists(ctx, primaryURL))
	primaryPool, err := database.Open(ctx, primaryURL, database.ServiceMaxConns)
	require.NoError(t, err)
	t.Cleanup(primaryPool.Close)
	require.NoError(t, database.Migrate(ctx, primaryPool, "gl"))
	standby, err := primary.StartStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = standby.Stop(ctx, false) })

	// The read URL as operators write it: several hosts, a standby preferred.
	readURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/gl?sslmode=disable&target_session_attrs=prefer-standby",
		primary.Port, standby.Port)
	readPool, err := database.Open(ctx, readURL, database.ServiceMaxConns)
	require.NoError(t, err)
	t.Cleanup(readPool.Close)
	var inRecovery bool
	require.NoError(t, readPool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.True(t, inRecovery, "prefer-standby reaches the standby though the primary is listed first")

	const bound = 2 * time.Second
	replica := database.NewReplica(primaryPool, readPool, bound)
	sampling, stopSampling := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return replica.Run(sampling) })
	t.Cleanup(func() { stopSampling(); require.NoError(t, g.Wait()) })

	primaryLedger, replicaLedger := postgres.NewLedger(primaryPool), postgres.NewLedger(readPool)
	_, guard, key := authtest.Key(t, primaryPool, auth.GLScopes)
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Ledger: primaryLedger, Guard: guard, Metrics: metrics.New("gl"),
		Replica: &httpapi.Replica{Ledger: replicaLedger, FreshnessFunc: replica.Staleness},
	}))
	post := func(transfer string, amount int64) {
		t.Helper()
		require.NoError(t, database.WithTx(ctx, primaryPool, func(tx pgx.Tx) error {
			_, err := primaryLedger.Post(ctx, tx, entry(transfer, "USD", amount))
			return err
		}))
	}
	type read struct {
		source    string
		staleness time.Duration
		entries   int
	}
	entries := func(transfer string) read {
		t.Helper()
		res := webtest.Do(t, http.MethodGet, server.URL+"/v1/entries?transfer_id="+transfer, authtest.Bearer(key), "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var body struct{ Entries []json.RawMessage }
		require.NoError(t, json.Unmarshal([]byte(res.Body), &body))
		seconds, err := strconv.ParseFloat(res.Header.Get(httpapi.ReadStalenessHeader), 64)
		require.NoError(t, err)
		return read{source: res.Header.Get(httpapi.ReadSourceHeader), staleness: time.Duration(seconds * float64(time.Second)), entries: len(body.Entries)}
	}
	// until reads transfer's entries until done says the answer is the awaited one.
	until := func(transfer string, done func(read) bool) read {
		t.Helper()
		for {
			r := entries(transfer)
			if done(r) {
				return r
			}
			select {
			case <-ctx.Done():
				t.Fatalf("last read of %s: %+v: %v", transfer, r, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	onReplica := func(r read) bool { return r.source == "replica" && r.entries == 1 }

	first := uuid.Must(uuid.NewV7()).String()
	post(first, 700)
	r := until(first, onReplica)
	require.LessOrEqual(t, r.staleness, bound)

	t.Run("every ledger read is served by the replica, saying how stale it is", func(t *testing.T) {
		for _, path := range []string{
			"/v1/entries",
			"/v1/accounts/1010/balance?currency=USD",
			"/v1/accounts/1010/balance?currency=USD&wallet_id=w-from",
			"/v1/accounts/1010/statement?currency=USD",
			"/v1/trial-balance",
		} {
			res := webtest.Do(t, http.MethodGet, server.URL+path, authtest.Bearer(key), "")
			require.Equal(t, http.StatusOK, res.Status, path+": "+res.Body)
			require.Equal(t, "replica", res.Header.Get(httpapi.ReadSourceHeader), path)
			seconds, err := strconv.ParseFloat(res.Header.Get(httpapi.ReadStalenessHeader), 64)
			require.NoError(t, err, path)
			require.LessOrEqual(t, seconds, bound.Seconds(), path)
		}
		balance, err := replicaLedger.AccountBalance(ctx, "1010", "USD", nil)
		require.NoError(t, err)
		require.Equal(t, "700", balance.Balance().String(), "the replica holds the posting")
	})

	t.Run("a replica whose replay is paused is left for the primary past the bound", func(t *testing.T) {
		standbyPool, err := pgxpool.New(ctx, standby.DatabaseURL("gl"))
		require.NoError(t, err)
		defer standbyPool.Close()
		_, err = standbyPool.Exec(ctx, "SELECT pg_wal_replay_pause()")
		require.NoError(t, err)
		second := uuid.Must(uuid.NewV7()).String()
		post(second, 300)
		r := until(second, func(r read) bool { return r.source == "primary" })
		require.Equal(t, 1, r.entries, "the primary's answer holds the posting")
		require.Zero(t, r.staleness)
		onStandby, err := replicaLedger.EntriesByTransfer(ctx, second)
		require.NoError(t, err)
		require.Empty(t, onStandby, "the paused replica lacks the posting the primary served")
		require.ErrorIs(t, replica.Health(ctx), database.ErrReplicaBehind)

		_, err = standbyPool.Exec(ctx, "SELECT pg_wal_replay_resume()")
		require.NoError(t, err)
		r = until(second, onReplica)
		require.LessOrEqual(t, r.staleness, bound)
	})

	t.Run("an idle primary leaves a caught-up replica fresh", func(t *testing.T) {
		// Nothing is posted now: the replay timestamp ages, the replica's answers do not.
		var last read
		for range 3 * int(bound/replica.SampleInterval()) {
			last = entries(first)
			require.Equal(t, "replica", last.source, "staleness %s", last.staleness)
			time.Sleep(replica.SampleInterval())
		}
		require.LessOrEqual(t, last.staleness, bound)
	})
}
