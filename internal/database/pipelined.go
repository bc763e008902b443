package database

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipelinedTx is a transaction on a pool's connection whose BEGIN travels with its first
// statement, in one batch (pgx's Batch.BeginTx): one round trip fewer per transaction, on the
// services' busiest paths (the wallet's group commit, every consumer's batch). Until that first
// statement it holds a connection and nothing else; from then on it is pgx's own transaction.
// A transaction that sends nothing commits and rolls back without a round trip. A first
// statement without arguments (pgx sends those by the simple protocol) or with a pgx option
// the batch cannot take (an exec mode other than cache_statement, a result format) begins the
// transaction alone, as do CopyFrom, SendBatch, Begin and LargeObjects.
type pipelinedTx struct {
	conn     *pgxpool.Conn
	tx       pgx.Tx // nil until begun
	released bool
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// beginPipelined acquires a connection of pool for a transaction that begins with its first
// statement.
func beginPipelined(ctx context.Context, pool *pgxpool.Pool) (*pipelinedTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection: %w", err)
	}
	return &pipelinedTx{conn: conn}, nil
}

// begin begins the transaction alone, when the statement that needs it cannot carry the BEGIN.
func (t *pipelinedTx) begin(ctx context.Context) (pgx.Tx, error) {
	if t.tx != nil {
		return t.tx, nil
	}
	if t.released {
		return nil, pgx.ErrTxClosed
	}
	tx, err := t.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	t.tx = tx
	return tx, nil
}

// batchable returns args without the cache_statement exec mode (a FixedPlan statement: it goes
// out by the name of a statement prepared on the connection instead) and whether the batch can
// carry the statement at all.
func (t *pipelinedTx) batchable(ctx context.Context, sql string, args []any) (string, []any, bool, error) {
	prepared := false
	if len(args) > 0 {
		if mode, ok := args[0].(pgx.QueryExecMode); ok {
			if mode != pgx.QueryExecModeCacheStatement {
				return sql, args, false, nil
			}
			args, prepared = args[1:], true
		}
	}
	if len(args) == 0 {
		// pgx sends a statement without arguments by the simple protocol, which also runs a
		// string of several; a batch would refuse such a string.
		return sql, args, false, nil
	}
	for _, a := range args {
		switch a.(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
			return sql, args, false, nil
		}
	}
	if prepared {
		// Named by its text: pgx's Prepare is idempotent, and a batch runs a statement
		// prepared under its text by that name.
		if _, err := t.conn.Conn().Prepare(ctx, sql, sql); err != nil {
			return sql, args, false, err
		}
	}
	return sql, args, true, nil
}

// send sends BEGIN and one statement in one batch and reads BEGIN's result; the caller reads the
// statement's and closes the batch.
func (t *pipelinedTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	br := t.conn.SendBatch(ctx, b)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("begin: %w", err)
	}
	return br, nil
}

// Exec runs sql, with BEGIN before it when it is the first statement.
func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil || t.released {
		tx, err := t.begin(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return tx.Exec(ctx, sql, args...)
	}
	sql, args, ok, err := t.batchable(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if !ok {
		tx, err := t.begin(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return tx.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql, with BEGIN before it when it is the first statement.
func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.tx != nil || t.released {
		tx, err := t.begin(ctx)
		if err != nil {
			return nil, err
		}
		return tx.Query(ctx, sql, args...)
	}
	sql, args, ok, err := t.batchable(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if !ok {
		tx, err := t.begin(ctx)
		if err != nil {
			return nil, err
		}
		return tx.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs sql, with BEGIN before it when it is the first statement.
func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return firstRow{rows: rows, err: err}
}

// firstRow is QueryRow's answer over Query's rows, as pgx's own: the first row scanned,
// ErrNoRows without one.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// batchRows are the rows of a transaction's first statement: closing them, or reading past
// the last, closes the batch that carried it, so the transaction can go on.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error // the batch's close
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// Commit commits what the transaction sent, if anything, and gives its connection back.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.released {
		return pgx.ErrTxClosed
	}
	defer t.release()
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(ctx)
}

// Rollback rolls back what the transaction sent, if anything, and gives its connection back.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.released {
		return pgx.ErrTxClosed
	}
	defer t.release()
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback(ctx)
}

// release gives the connection back to its pool, which closes it if it is still in a
// transaction (a commit or rollback that failed on the way).
func (t *pipelinedTx) release() {
	t.released = true
	t.conn.Release()
}

// Begin begins a savepoint, beginning the transaction first.
func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.begin(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return tx.SendBatch(ctx, b)
}

// LargeObjects begins the transaction (with a context that cannot be cancelled: pgx's method
// takes none) and returns its large objects.
func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.begin(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Prepare prepares on the transaction's connection: a prepared statement is the connection's,
// begun or not.
func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.released {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Conn().Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn.Conn() }
