package database_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
)

// openPool opens a pool of one connection as a service does (bookkeeping: the relay's pool),
// closed when the test ends.
func openPool(t *testing.T, url string, bookkeeping bool) *pgxpool.Pool {
	t.Helper()
	open := database.Open
	if bookkeeping {
		open = database.OpenBookkeeping
	}
	pool, err := open(context.Background(), url, 1)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func setting(t *testing.T, url string, bookkeeping bool, name string) string {
	t.Helper()
	var value string
	require.NoError(t, openPool(t, url, bookkeeping).QueryRow(context.Background(), "SHOW "+name).Scan(&value))
	return value
}

// namedStatements runs a statement with a parameter three times on one connection of a pool
// and returns the statements the server then holds prepared under a name for that session.
func namedStatements(t *testing.T, url string, bookkeeping bool) int {
	t.Helper()
	ctx := context.Background()
	pool := openPool(t, url, bookkeeping)
	for i := range 3 {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relpages >= $1", i).Scan(&n))
	}
	var named int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").Scan(&named))
	return named
}

func TestPoolsCompileNoQueryUnlessTheURLSaysOtherwise(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	require.Equal(t, "off", setting(t, url, false, "jit"))
	require.Equal(t, "off", setting(t, url, true, "jit"))
	require.Equal(t, "on", setting(t, url+"&options=-c%20jit%3Don", false, "jit"))
}

// plannedWorkers returns the parallel workers db's plan of query asks for (EXPLAIN).
func plannedWorkers(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, query string) int {
	t.Helper()
	var plan []struct {
		Plan map[string]any `json:"Plan"`
	}
	require.NoError(t, db.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+query).Scan(&plan))
	var planned func(node map[string]any) int
	planned = func(node map[string]any) int {
		n := 0
		if w, ok := node["Workers Planned"].(float64); ok {
			n += int(w)
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			if child, ok := c.(map[string]any); ok {
				n += planned(child)
			}
		}
		return n
	}
	return planned(plan[0].Plan)
}

// A table nothing has analyzed, sized from its pages, gets a parallel plan on a plain
// connection that allows one; the services' pools plan it in their own backend, unless the URL
// sets max_parallel_workers_per_gather itself. An operator command's pool keeps the server's
// setting.
func TestPoolsStartNoParallelWorkersUnlessTheURLSaysOtherwise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := envtest.DatabaseURL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	var serverSetting string
	require.NoError(t, conn.QueryRow(ctx, "SHOW max_parallel_workers_per_gather").Scan(&serverSetting))
	_, err = conn.Exec(ctx, `CREATE TABLE unanalyzed (id bigint, status text) WITH (autovacuum_enabled = off);
		INSERT INTO unanalyzed SELECT g, 'acknowledged' FROM generate_series(1, 300000) AS g`)
	require.NoError(t, err)
	const query = "SELECT count(*) FROM unanalyzed WHERE status = 'pending'"
	serverPlan := plannedWorkers(t, conn, query) // as the server's setting plans it
	_, err = conn.Exec(ctx, "SET max_parallel_workers_per_gather = 2")
	require.NoError(t, err)
	require.Positive(t, plannedWorkers(t, conn, query), "a connection allowing parallel plans plans it in parallel")

	for _, bookkeeping := range []bool{false, true} {
		require.Equal(t, "0", setting(t, url, bookkeeping, "max_parallel_workers_per_gather"), "bookkeeping %v", bookkeeping)
		require.Zero(t, plannedWorkers(t, openPool(t, url, bookkeeping), query), "bookkeeping %v", bookkeeping)
	}
	require.Positive(t, plannedWorkers(t, openPool(t, url+"&options=-c%20max_parallel_workers_per_gather%3D2", false), query))

	tool, err := database.OpenTool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(tool.Close)
	var toolSetting string
	require.NoError(t, tool.QueryRow(ctx, "SHOW max_parallel_workers_per_gather").Scan(&toolSetting))
	require.Equal(t, serverSetting, toolSetting, "an operator command's pool keeps the server's setting")
	require.Equal(t, serverPlan, plannedWorkers(t, tool, query))
}

// The services' statements are planned at each execution for their parameters (sent unnamed:
// the server holds no named statement with a kept plan for them), while the session's
// plan_cache_mode stays the server's, so that the queries the database runs inside triggers and
// foreign-key checks keep their plans. A URL choosing pgx's exec mode itself is obeyed.
func TestPoolsPlanEachExecutionUnlessTheURLSaysOtherwise(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	for _, bookkeeping := range []bool{false, true} {
		require.Zero(t, namedStatements(t, url, bookkeeping), "bookkeeping %v", bookkeeping)
		require.Equal(t, "auto", setting(t, url, bookkeeping, "plan_cache_mode"), "bookkeeping %v", bookkeeping)
		require.Positive(t, namedStatements(t, url+"&default_query_exec_mode=cache_statement", bookkeeping), "bookkeeping %v", bookkeeping)
	}
}

// preparedInTx runs, in one WithTx transaction on a pool of one connection, a statement marked
// database.FixedPlan and one that is not, each with a parameter, and returns the statements the
// session then holds prepared under a name.
func preparedInTx(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	pool := openPool(t, url, false)
	require.NoError(t, database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		for i := range 3 {
			if _, err := tx.Exec(ctx, "SELECT "+database.FixedPlan+" pg_advisory_xact_lock_shared($1::bigint)", int64(i)); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relpages >= $1", i).Scan(&n); err != nil {
				return err
			}
		}
		return nil
	}))
	var statements []string
	require.NoError(t, pool.QueryRow(ctx, "SELECT coalesce(array_agg(statement), '{}') FROM pg_prepared_statements WHERE NOT from_sql").Scan(&statements))
	return statements
}

// A statement marked FixedPlan goes out prepared in a transaction WithTx began (its plan has
// nothing to choose, so a kept one cannot go stale); the statements beside it stay unnamed and
// planned at each execution. A URL choosing pgx's exec mode itself keeps it for all of them.
func TestOnlyStatementsMarkedFixedPlanArePrepared(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	prepared := preparedInTx(t, url)
	require.Len(t, prepared, 1, "one statement held prepared: %q", prepared)
	require.Contains(t, prepared[0], database.FixedPlan)
	require.Empty(t, preparedInTx(t, url+"&default_query_exec_mode=exec"), "the URL's exec mode is obeyed")
}

// The pools know github.com/google/uuid's types (EncodeUUIDsDirectly): ids, arrays of ids and
// nullable ids go out and come back as they were, and the connection's type map decodes a uuid
// as a uuid.UUID, which it does only with the types registered.
func TestPoolsEncodeUUIDsAsTheirOwnType(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	ctx := context.Background()
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for _, bookkeeping := range []bool{false, true} {
		pool := openPool(t, url, bookkeeping)
		var (
			back    []uuid.UUID
			one     uuid.UUID
			null    uuid.NullUUID
			present uuid.NullUUID
		)
		require.NoError(t, pool.QueryRow(ctx, "SELECT $1::uuid[], $2::uuid, $3::uuid, $4::uuid",
			ids, ids[0], uuid.NullUUID{}, uuid.NullUUID{UUID: ids[1], Valid: true}).Scan(&back, &one, &null, &present))
		require.Equal(t, ids, back, "bookkeeping %v", bookkeeping)
		require.Equal(t, ids[0], one)
		require.False(t, null.Valid)
		require.Equal(t, uuid.NullUUID{UUID: ids[1], Valid: true}, present)

		rows, err := pool.Query(ctx, "SELECT $1::uuid", ids[2])
		require.NoError(t, err)
		require.True(t, rows.Next())
		values, err := rows.Values()
		require.NoError(t, err)
		rows.Close()
		require.Equal(t, []any{ids[2]}, values, "bookkeeping %v: decoded as uuid.UUID", bookkeeping)
	}
}

func TestAfterCommitRunsOnlyOnceCommittedAndNotForSavepoints(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	var ran []string
	err := database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		require.True(t, database.AfterCommit(tx, func() { ran = append(ran, "committed") }))
		sp, err := tx.Begin(ctx)
		require.NoError(t, err)
		require.False(t, database.AfterCommit(sp, func() { ran = append(ran, "savepoint") }))
		require.Empty(t, ran, "nothing runs before the commit")
		return sp.Commit(ctx)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"committed"}, ran)

	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		database.AfterCommit(tx, func() { ran = append(ran, "rolled back") })
		return errors.New("refused")
	})
	require.Error(t, err)
	require.False(t, database.AfterCommit(pool, func() {}), "a pool has no commit to wait for")
	require.Equal(t, []string{"committed"}, ran)
}

func TestWithTxVReturnsItsValueAndNestsAsASavepoint(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, url, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE t (v int)")
	require.NoError(t, err)

	n, err := database.WithTxV(ctx, pool, func(tx pgx.Tx) (int, error) {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)")
		require.NoError(t, err)
		// On a transaction, WithTx is a savepoint: its rollback keeps the outer work.
		err = database.WithTx(ctx, tx, func(sp pgx.Tx) error {
			require.False(t, database.AfterCommit(sp, func() {}), "a savepoint's rows may still be rolled back")
			_, err := sp.Exec(ctx, "INSERT INTO t VALUES (2)")
			require.NoError(t, err)
			return errors.New("refused")
		})
		require.EqualError(t, err, "refused")
		var n int
		return n, tx.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	n, err = database.WithTxV(ctx, pool, func(tx pgx.Tx) (int, error) {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES (3)")
		return 7, errors.Join(err, errors.New("refused"))
	})
	require.EqualError(t, err, "refused")
	require.Zero(t, n, "a failed transaction returns the zero value")
	var total int
	require.NoError(t, pool.QueryRow(ctx, "SELECT coalesce(sum(v), 0) FROM t").Scan(&total))
	require.Equal(t, 1, total, "only the committed row is there")
}

func TestWithTxHidesNoRetryAndRetrySerializationSaysIt(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}

	calls := 0
	err := database.WithTx(ctx, pool, func(pgx.Tx) error { calls++; return deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, 1, calls, "WithTx runs its function once")

	calls = 0
	v, err := database.RetrySerialization(ctx, 3, func() (string, error) {
		return database.WithTxV(ctx, pool, func(pgx.Tx) (string, error) {
			calls++
			if calls < 3 {
				return "", &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
			}
			return "done", nil
		})
	})
	require.NoError(t, err)
	require.Equal(t, "done", v)
	require.Equal(t, 3, calls)

	calls = 0
	_, err = database.RetrySerialization(ctx, 3, func() (string, error) { calls++; return "", deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, 3, calls, "attempts bound the retries")

	calls = 0
	refused := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	_, err = database.RetrySerialization(ctx, 3, func() (string, error) { calls++; return "", refused })
	require.ErrorIs(t, err, refused)
	require.Equal(t, 1, calls, "any other error is not retried")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	_, err = database.RetrySerialization(cancelled, 3, func() (string, error) { calls++; return "", deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, 1, calls, "a cancelled context ends the retries")
}

// cutProxy forwards connections to the PostgreSQL server of url until cut closes them all, as a
// network failure would: without a word from the server.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startCutProxy(t *testing.T, url string) (*cutProxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(server, client) }()
			go func() { _, _ = io.Copy(client, server) }()
		}
	}()
	proxied := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, ln.Addr(), cfg.Database)
	return p, proxied
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func TestBrokenConnectionsAreUnavailableAndTransient(t *testing.T) {
	t.Parallel()
	url := envtest.DatabaseURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	terminate := func(t *testing.T, conn interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) {
		t.Helper()
		var pid int32
		require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
		_, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
		require.NoError(t, err)
	}

	cases := []struct {
		name string
		err  func(t *testing.T) error
	}{
		{"a refused connection", func(t *testing.T) error {
			// Port 1 on loopback: nothing listens, the connection is refused at once.
			pool, err := database.Open(ctx, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", 1)
			require.NoError(t, err)
			defer pool.Close()
			_, err = pool.Exec(ctx, "SELECT 1")
			return err
		}},
		{"a closed pool", func(t *testing.T) error {
			pool, err := database.Open(ctx, url, 1)
			require.NoError(t, err)
			pool.Close()
			_, err = pool.Exec(ctx, "SELECT 1")
			return err
		}},
		{"a closed connection", func(t *testing.T) error {
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			require.NoError(t, conn.Close(ctx))
			_, err = conn.Exec(ctx, "SELECT 1")
			return err
		}},
		{"a backend terminated between statements", func(t *testing.T) error {
			pool, err := database.Open(ctx, url, 1)
			require.NoError(t, err)
			defer pool.Close()
			terminate(t, pool)
			_, err = pool.Exec(ctx, "SELECT 1")
			return err
		}},
		{"a backend terminated during a statement", func(t *testing.T) error {
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var pid int32
			require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Once the sleep below has begun.
				for range 500 {
					var active bool
					if admin.QueryRow(ctx, "SELECT state = 'active' FROM pg_stat_activity WHERE pid = $1", pid).Scan(&active) == nil && active {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
			}()
			_, err = conn.Exec(ctx, "SELECT pg_sleep(10)")
			<-done // admin is free for the next case
			return err
		}},
		{"the connection of a terminated backend used again", func(t *testing.T) error {
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			terminate(t, tx)
			_, err = tx.Exec(ctx, "SELECT 1")
			require.Error(t, err)
			return tx.Commit(ctx)
		}},
		{"a connection cut by the network", func(t *testing.T) error {
			proxy, proxied := startCutProxy(t, url)
			conn, err := pgx.Connect(ctx, proxied)
			require.NoError(t, err)
			defer conn.Close(ctx)
			proxy.cut()
			_, err = conn.Exec(ctx, "SELECT 1")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			require.Error(t, err)
			require.True(t, database.IsUnavailable(err), "IsUnavailable(%v)", err)
			require.True(t, database.IsTransient(err), "IsTransient(%v)", err)
			// Whatever else the chain holds: a statement's error around it changes nothing.
			wrapped := fmt.Errorf("%w; then: %w", &pgconn.PgError{Code: "23505"}, err)
			require.True(t, database.IsUnavailable(wrapped), "IsUnavailable(%v)", wrapped)
			require.True(t, database.IsTransient(wrapped), "IsTransient(%v)", wrapped)
		})
	}
}

func TestStatementErrorsAreNotUnavailable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		errors.New("refused"),
		&pgconn.PgError{Code: "23505"}, // unique violation
		&pgconn.PgError{Code: "42P01"}, // undefined table
		fmt.Errorf("get: %w", pgx.ErrNoRows),
	} {
		require.False(t, database.IsUnavailable(err), "IsUnavailable(%v)", err)
		require.False(t, database.IsTransient(err), "IsTransient(%v)", err)
	}
	require.False(t, database.IsUnavailable(&pgconn.PgError{Code: "40001"}), "a serialization failure is no outage")
	require.True(t, database.IsTransient(&pgconn.PgError{Code: "40001"}))
}

func TestInterpretNamesNoRowAndUnavailableInTheAdaptersTerms(t *testing.T) {
	t.Parallel()
	notFound, unavailable := errors.New("no such thing"), errors.New("retry later")
	require.NoError(t, database.Interpret(nil, notFound, unavailable))
	require.Equal(t, notFound, database.Interpret(fmt.Errorf("get: %w", pgx.ErrNoRows), notFound, unavailable))

	pool, err := database.Open(context.Background(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable", 1)
	require.NoError(t, err)
	pool.Close()
	_, closed := pool.Exec(context.Background(), "SELECT 1")
	err = database.Interpret(closed, notFound, unavailable)
	require.ErrorIs(t, err, unavailable)
	require.ErrorIs(t, err, closed, "the driver's error stays behind it")
	require.True(t, database.IsTransient(err))

	refused := &pgconn.PgError{Code: "23505"}
	require.Equal(t, error(refused), database.Interpret(refused, notFound, unavailable), "anything else passes unchanged")
}
