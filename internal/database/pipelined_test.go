package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/testenv"
)

// countingProxy forwards connections to the PostgreSQL server of url and counts what the
// clients send: one read per message flight, since a client waits for each answer.
type countingProxy struct{ flights atomic.Int64 }

func startCountingProxy(t *testing.T, url string) (*countingProxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	p := &countingProxy{}
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
			t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
			go p.forward(server, client, true)
			go p.forward(client, server, false)
		}
	}()
	return p, fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, ln.Addr(), cfg.Database)
}

func (p *countingProxy) forward(dst, src net.Conn, count bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if count {
				p.flights.Add(1)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// A transaction WithTx begins on a pool sends its BEGIN with its first statement: a
// transaction of one statement costs two round trips (BEGIN and the statement, COMMIT), and
// one that sends nothing costs none.
func TestATransactionsBeginTravelsWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy, url := startCountingProxy(t, testenv.DatabaseURL(t))
	pool, err := database.Open(ctx, url, 1)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE t (v int)")
	require.NoError(t, err)
	insert := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 1)
		return err
	}
	require.NoError(t, database.WithTx(ctx, pool, insert), "the first run describes the statements")

	before := proxy.flights.Load()
	require.NoError(t, database.WithTx(ctx, pool, insert))
	require.Equal(t, int64(2), proxy.flights.Load()-before, "BEGIN with the INSERT, then COMMIT")

	before = proxy.flights.Load()
	require.NoError(t, database.WithTx(ctx, pool, func(pgx.Tx) error { return nil }))
	require.Equal(t, int64(0), proxy.flights.Load()-before, "nothing sent, nothing to commit")
}

// Whichever way the first statement goes (Exec, Query, QueryRow), it runs inside the
// transaction: a rollback takes it back, and the statements after it see it.
func TestTheFirstStatementIsPartOfItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, testenv.DatabaseURL(t), 1)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE t (v int)")
	require.NoError(t, err)
	refused := errors.New("refused")
	firsts := map[string]func(tx pgx.Tx) error{
		"Exec": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 1)
			return err
		},
		"Query": func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "INSERT INTO t VALUES ($1), ($1) RETURNING v", 2)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err == nil && len(got) != 2 {
				err = fmt.Errorf("got %v", got)
			}
			return err
		},
		"QueryRow": func(tx pgx.Tx) error {
			var v int32
			return tx.QueryRow(ctx, "INSERT INTO t VALUES ($1) RETURNING v", 3).Scan(&v)
		},
		"fixed plan": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT "+database.FixedPlan+" INTO t VALUES ($1)", 4)
			return err
		},
	}
	for name, first := range firsts {
		err := database.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
				return err
			}
			require.Positive(t, n, "%s: the next statement sees the first one's rows", name)
			return refused
		})
		require.ErrorIs(t, err, refused, name)
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
		require.Zero(t, n, "%s: rolled back with its transaction", name)
	}

	for name, first := range firsts {
		require.NoError(t, database.WithTx(ctx, pool, first), name)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 5, n, "committed: one, two, one and one rows")
}

// A first statement that fails, or finds no row, answers as it would alone; the transaction
// is rolled back and its connection serves the next one.
func TestAFailedFirstStatementLeavesAUsableConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, testenv.DatabaseURL(t), 1)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE t (v int PRIMARY KEY)")
	require.NoError(t, err)

	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		var v int
		return tx.QueryRow(ctx, "SELECT v FROM t WHERE v = $1", 1).Scan(&v)
	})
	require.ErrorIs(t, err, pgx.ErrNoRows)

	for _, first := range []func(tx pgx.Tx) error{
		func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1), ($1)", 1); return err },
		func(tx pgx.Tx) error { return tx.QueryRow(ctx, "SELECT 1/$1::int", 0).Scan(new(int)) },
		func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT 1/v FROM (VALUES (1), (0)) AS x(v) WHERE v <= $1", 1)
			if err != nil {
				return err
			}
			_, err = pgx.CollectRows(rows, pgx.RowTo[int32])
			return err
		},
	} {
		err := database.WithTx(ctx, pool, first)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n), "the one connection is back and idle")
		require.Zero(t, n)
	}

	// A statement error the function swallows still fails the commit.
	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, _ = tx.Exec(ctx, "INSERT INTO t VALUES ($1), ($1)", 2)
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
}
