// Package database owns the PostgreSQL plumbing both services share: creating a missing
// database, the connection pool, goose migrations and the runtime role's privileges (Grant,
// CheckPrivileges), the one transaction helper (WithTx,
// WithTxV) with its explicit retry (RetrySerialization), and the reading of driver errors
// (IsUnavailable, IsTransient).
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/puddle/v2"
	"github.com/pressly/goose/v3"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"

	"walletgl/db"
)

// Pool sizes, unless a database URL sets pool_max_conns.
const (
	// ServiceMaxConns is a service's main pool: the API, the consumer, the relay's listener and
	// the batcher share it, and pgxpool's default (4 on two cores) made requests queue.
	ServiceMaxConns = 20
	// BookkeepingMaxConns is the relay's pool for claims and marks (OpenBookkeeping).
	BookkeepingMaxConns = 4
	// ToolMaxConns is an operator command's pool.
	ToolMaxConns = 2
)

// Open connects a pool to the database at url, with at most maxConns connections unless the
// URL sets pool_max_conns (0: pgxpool's default). Its commits are synchronous.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, maxConns, false, false)
}

// OpenTool connects an operator command's pool (ToolMaxConns) as Open does, except that the
// server may run its reads in parallel, as the server's settings say: gl verify, gl reconcile
// and the outbox listings read whole tables, which is what parallel plans are for.
func OpenTool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return open(ctx, url, ToolMaxConns, true, false)
}

// OpenToolReadOnly is OpenTool for a command that only reads: its sessions cannot change a
// row, whatever its code does (ReadOnlySessions).
func OpenToolReadOnly(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return open(ctx, url, ToolMaxConns, true, true)
}

func open(ctx context.Context, url string, maxConns int32, parallel, readOnly bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	switch {
	case strings.Contains(url, "pool_max_conns"): // the URL says
	case maxConns > 0:
		cfg.MaxConns = maxConns
	}
	planEachExecution(cfg, url)
	noJIT(cfg, url)
	if !parallel {
		noParallelWorkers(cfg, url)
	}
	EncodeUUIDsDirectly(cfg)
	if readOnly {
		ReadOnlySessions(cfg)
	}
	// Transfers and postings commit only once their WAL is on disk (and, where the server has
	// a synchronous standby, on the standby too), whatever the database's or the role's
	// default says: a synchronous_commit = off or local there would make them lossy.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool %s: %w", cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// noJIT turns PostgreSQL's JIT compilation off for the services' short statements unless the URL
// sets jit itself. JIT starts above a plan's estimated cost, not its real one: the GL's trial
// balance reads a checkpoint's time and the lines after it, which the planner, not knowing the
// time, estimates at a third of journal_lines; at 10 million lines that estimate crossed
// jit_above_cost and every trial balance spent about 25 ms compiling a query that runs in 12
// (docs/decisions/0010-plans-per-execution-fixed-plans-prepared.md).
func noJIT(cfg *pgxpool.Config, url string) {
	if !urlSets(url, "jit") {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
}

// noParallelWorkers keeps the services' statements in their own backend unless the URL sets
// max_parallel_workers_per_gather itself. Each reads a handful of rows through an index, and
// a parallel plan only comes from a wrong estimate: a table nothing has analyzed is sized
// from its pages, which hold a dead version of every row for each status it went through, so
// the metrics' outbox counts were planned as a Gather and started two worker processes at
// every scrape: 57-65 ms a scrape of the GL against 3 ms without
// (docs/decisions/0010-plans-per-execution-fixed-plans-prepared.md).
// Starting a worker is a fork of the postmaster on the machine the pipeline shares.
func noParallelWorkers(cfg *pgxpool.Config, url string) {
	if !urlSets(url, "max_parallel_workers_per_gather") {
		cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
}

// EncodeUUIDsDirectly teaches the pool's connections github.com/google/uuid's types, which the
// generated queries use for every uuid column. Without it pgx takes a uuid.UUID for an unknown
// driver.Valuer: each one becomes its 36-character text, a failed binary encoding (an error
// formatted and dropped) and a parse back into 16 bytes. An array of 100 ids took about 470 µs
// to encode that way and 50 µs this way; the hot statements take arrays of ids, several per
// event (docs/decisions/0010-plans-per-execution-fixed-plans-prepared.md).
func EncodeUUIDsDirectly(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// ReadOnlySessions makes every session of cfg's pool read-only (default_transaction_read_only
// = on) once it is connected. As a start-up parameter it would already be in force when the
// driver asks each server of a multi-host URL with target_session_attrs=read-write whether
// it takes writes (SHOW transaction_read_only): every server, the primary too, would answer
// no, and the pool could connect nowhere.
func ReadOnlySessions(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
			return fmt.Errorf("make the session read-only: %w", err)
		}
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// urlSets reports whether a connection URL sets the server parameter name (options=-c name=…,
// its '=' escaped or not).
func urlSets(url, name string) bool {
	lower := strings.ToLower(url)
	return strings.Contains(lower, name+"=") || strings.Contains(lower, name+"%3d")
}

// planEachExecution has the server plan every execution of the services' own statements for
// its parameters, unless the URL chooses pgx's default_query_exec_mode itself: statements go
// out unnamed (pgx's cache_describe: their descriptions cached, one round trip each), and an
// unnamed statement is planned at each Bind with the values it gets. The hot statements take
// arrays (id = ANY($1)) on tables that start empty and grow; a cached generic plan is made once,
// when they are small, and kept until the statistics change. Where nothing analyzes them
// (autovacuum off, as on the machines this project runs on), it stays a sequential scan of the
// whole table for every batch, which cost the wallet's database about three times the CPU per
// transfer (docs/decisions/0010-plans-per-execution-fixed-plans-prepared.md).
//
// It is not the session's plan_cache_mode = force_custom_plan, which this did before: that
// also planned anew every query run inside the database for each row, the foreign-key checks
// of every inserted line and transfer and the triggers' queries, about half of the GL's
// database CPU per posting. Those keep the server's plan caching:
// each looks one row up by its key. The statements marked FixedPlan, whose plan has nothing to
// choose, are the exception: in a WithTx transaction they go out prepared (hookedTx).
func planEachExecution(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
}

// OpenBookkeeping connects a small pool whose commits do not wait for the WAL flush
// (synchronous_commit = off), for writes whose loss in a database crash is harmless because
// they are redone: the relay's claims and marks (a lost mark means a re-publish, which the
// broker's duplicate window and the consumer's inbox absorb). Money never moves on it.
func OpenBookkeeping(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	planEachExecution(cfg, url)
	noJIT(cfg, url)
	noParallelWorkers(cfg, url)
	EncodeUUIDsDirectly(cfg)
	// The relay's statements take the oldest rows of a partial index in id order with a LIMIT.
	// Without statistics (nothing analyzes a table that just took a backlog), the planner
	// expects few rows there and prefers a bitmap scan of all of them and a sort, several times
	// slower than reading the index in order once the backlog is large.
	if !strings.Contains(url, "enable_bitmapscan") {
		cfg.ConnConfig.RuntimeParams["enable_bitmapscan"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open bookkeeping pool %s: %w", cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// EnsureExists creates the database named in url when it is missing, connecting to the
// server's maintenance database "postgres" to do it.
func EnsureExists(ctx context.Context, dbURL string) error {
	return onServer(ctx, dbURL, "create", func(conn *pgx.Conn, name string) error {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			return fmt.Errorf("look up database %s: %w", name, err)
		}
		if exists {
			return nil
		}
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created meanwhile by another process
			return nil
		}
		if err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
		return nil
	})
}

// Drop removes the database named in url, closing its connections (tests use it to clean up).
func Drop(ctx context.Context, dbURL string) error {
	return onServer(ctx, dbURL, "drop", func(conn *pgx.Conn, name string) error {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	})
}

// onServer runs fn on a connection to the maintenance database "postgres" of dbURL's server,
// with the name of dbURL's database (verb says what for, in errors).
func onServer(ctx context.Context, dbURL, verb string, fn func(conn *pgx.Conn, name string) error) error {
	name, adminURL, err := splitDatabase(dbURL)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s database %s: %w", verb, name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn, name)
}

func splitDatabase(dbURL string) (name, adminURL string, err error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "", "", fmt.Errorf("parse database url: %w", err)
	}
	name = cfg.Database
	if name == "" {
		return "", "", fmt.Errorf("database url names no database")
	}
	return name, WithDatabase(dbURL, name, "postgres"), nil
}

// WithDatabase returns dbURL, which names the database current, naming name instead: the same
// servers, user and parameters. A URL's path is replaced as text, not through net/url, so that
// every host of a multi-host URL (an HA cluster's) stays as it was written.
func WithDatabase(dbURL, current, name string) string {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		rest, ok := strings.CutPrefix(dbURL, scheme)
		if !ok {
			continue
		}
		// The authority (user, password and hosts, where '/' and '?' must be escaped) ends at
		// the path or the query.
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			return dbURL + "/" + url.PathEscape(name)
		}
		authority, after := rest[:end], rest[end:]
		query := ""
		if q := strings.IndexByte(after, '?'); q >= 0 {
			query = after[q:]
		}
		return scheme + authority + "/" + url.PathEscape(name) + query
	}
	// key=value form
	return strings.Replace(dbURL, "dbname="+current, "dbname="+name, 1)
}

// Identity is the database and the user a URL connects as, with the defaults filled in as the
// driver fills them (PGUSER, PGDATABASE, the operating system's user).
type Identity struct {
	Database string
	User     string
}

// IdentityOf reads the database and the user of dbURL.
func IdentityOf(dbURL string) (Identity, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return Identity{}, fmt.Errorf("parse database url: %w", err)
	}
	return Identity{Database: cfg.Database, User: cfg.User}, nil
}

// migrationSets are the goose sets of a service's database, in the order they apply.
func migrationSets(service string) []string { return []string{"events", "auth", service} }

// MigrationsCurrent reports a migration the database behind pool lacks: a service whose
// database is behind its code must not take work. A least-privilege runtime role may not read
// the migration tables (docs/database-roles.md): then nothing can be told, and nothing is
// reported.
func MigrationsCurrent(ctx context.Context, pool *pgxpool.Pool, service string) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	for _, set := range migrationSets(service) {
		provider, err := migrationProvider(sqlDB, set)
		if err != nil {
			return err
		}
		pending, err := provider.HasPending(ctx)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return nil
		}
		if err != nil {
			return fmt.Errorf("check migrations %s: %w", set, err)
		}
		if pending {
			return fmt.Errorf("migrations %s: the database lacks some; run migrate", set)
		}
	}
	return nil
}

func migrationProvider(sqlDB *sql.DB, set string) (*goose.Provider, error) {
	fsys, err := db.Migrations(set)
	if err != nil {
		return nil, fmt.Errorf("load migrations %s: %w", set, err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys, goose.WithTableName("goose_"+set+"_version"))
	if err != nil {
		return nil, fmt.Errorf("prepare migrations %s: %w", set, err)
	}
	return provider, nil
}

// Migrate applies the shared migration sets, "events" (outbox and inbox) and "auth" (API keys
// and audit), and then the service's own set (each with its own goose version table) to the
// database behind pool.
func Migrate(ctx context.Context, pool *pgxpool.Pool, service string) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	for _, set := range migrationSets(service) {
		provider, err := migrationProvider(sqlDB, set)
		if err != nil {
			return err
		}
		if _, err := provider.Up(ctx); err != nil {
			return fmt.Errorf("apply migrations %s: %w", set, err)
		}
	}
	return nil
}

// Grant gives role, the service's runtime role, exactly the privileges the service needs on
// what the migration sets of Migrate created (db/roles): it first takes every privilege on the
// schema's tables and sequences away from it, so that a privilege no longer granted there, or
// granted by hand, does not survive a migrate. It also keeps every other role out of the
// database (CONNECT is the runtime role's and the owner's). pool connects as the owner or a
// superuser; the role must exist (roles are the server's, not a database's: creating one and
// its password is an administrator's job).
func Grant(ctx context.Context, pool *pgxpool.Pool, service, role string) error {
	dbName := pool.Config().ConnConfig.Database
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return fmt.Errorf("look up role %s: %w", role, err)
	}
	if !exists {
		return fmt.Errorf("grant %s's privileges: role %q does not exist: create it first (CREATE ROLE %s LOGIN PASSWORD …)",
			service, role, pgx.Identifier{role}.Sanitize())
	}
	placeholders := strings.NewReplacer(
		`:"runtime_role"`, pgx.Identifier{role}.Sanitize(),
		`:"database"`, pgx.Identifier{dbName}.Sanitize(),
	)
	return WithTx(ctx, pool, func(tx pgx.Tx) error {
		for _, set := range []string{"reset", "events", "auth", service} {
			sql, err := db.Roles(set)
			if err != nil {
				return fmt.Errorf("load grants %s: %w", set, err)
			}
			// Without arguments pgx sends the file as one simple query: several statements.
			if _, err := tx.Exec(ctx, placeholders.Replace(sql)); err != nil {
				return fmt.Errorf("grant %s to role %s: %w", set, role, err)
			}
		}
		return nil
	})
}

// Privileges is how much the user of a connection may do beyond a service's needs.
type Privileges struct {
	User      string
	Superuser bool // every check of privileges passes
	Owner     bool // owns (or is a member of a role that owns) the database or a table in its schema
	CanCreate bool // may create objects in the schema (DDL)
}

// CheckPrivileges tells who conn's user is: a superuser, an owner, or neither (a runtime role).
func CheckPrivileges(ctx context.Context, conn Executor) (Privileges, error) {
	query, err := db.Roles("privileges")
	if err != nil {
		return Privileges{}, fmt.Errorf("load the privileges check: %w", err)
	}
	var p Privileges
	err = conn.QueryRow(ctx, query).Scan(&p.User, &p.Superuser, &p.Owner, &p.CanCreate)
	if err != nil {
		return Privileges{}, fmt.Errorf("read the privileges of the database user: %w", err)
	}
	return p, nil
}

// Server is what serve checks of the PostgreSQL server it runs on.
type Server struct {
	Autovacuum bool // the autovacuum launcher runs (the setting autovacuum)
}

// CheckServer reads the server's settings that serve warns about.
func CheckServer(ctx context.Context, conn Executor) (Server, error) {
	query, err := db.Roles("server")
	if err != nil {
		return Server{}, fmt.Errorf("load the server check: %w", err)
	}
	var s Server
	if err := conn.QueryRow(ctx, query).Scan(&s.Autovacuum); err != nil {
		return Server{}, fmt.Errorf("read the server's settings: %w", err)
	}
	return s, nil
}

// Executor runs statements: a pool, a connection or a transaction. The generated queries of
// every adapter take one.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner is what WithTx and WithTxV begin on: a pool or a connection (a transaction of its
// own) or a transaction (a savepoint within it).
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction begun on db and commits it when fn returns nil (see WithTxV).
func WithTx(ctx context.Context, db TxBeginner, fn func(pgx.Tx) error) error {
	_, err := WithTxV(ctx, db, func(tx pgx.Tx) (struct{}, error) { return struct{}{}, fn(tx) })
	return err
}

// WithTxV runs fn in a transaction begun on db, commits it when fn returns nil and returns fn's
// value. On a pool it is a transaction of its own, whose AfterCommit hooks run once it has
// committed; on a transaction it is a savepoint, which commits or rolls back with its parent.
// Whatever fn returns, the rollback runs even when ctx is cancelled. Nothing is retried: a
// caller that wants a deadlock or a serialization failure tried again says so
// (RetrySerialization).
func WithTxV[T any](ctx context.Context, db TxBeginner, fn func(pgx.Tx) (T, error)) (T, error) {
	var zero T
	begun, err := db.Begin(ctx)
	if err != nil {
		return zero, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = begun.Rollback(context.WithoutCancel(ctx)) }()
	var tx pgx.Tx = begun
	var hooked *hookedTx
	if _, savepoint := db.(pgx.Tx); !savepoint {
		hooked = &hookedTx{Tx: begun}
		tx = hooked
	}
	v, err := fn(tx)
	if err != nil {
		return zero, err
	}
	if err := begun.Commit(ctx); err != nil {
		return zero, fmt.Errorf("commit: %w", err)
	}
	if hooked != nil {
		for _, hook := range hooked.afterCommit {
			hook()
		}
	}
	return v, nil
}

// hookedTx is the transaction WithTxV hands to its function on a pool: it keeps what must run
// once the transaction has committed (AfterCommit), and sends the statements marked FixedPlan
// as prepared statements.
type hookedTx struct {
	pgx.Tx
	afterCommit []func()
	// prepare says whether FixedPlan statements go out prepared: decided at the first one, from
	// the pool's exec mode (0: not decided yet).
	prepare int8
}

// FixedPlan marks, inside a query's text (`INSERT /* fixed plan */ INTO …`), a statement whose
// plan has no choice to make: an INSERT from unnest, an advisory lock, a read of a whole small
// table without parameters. In a transaction WithTx or WithTxV began on a pool that plans each
// execution (planEachExecution), such a statement goes out as a named prepared statement
// instead (pgx's cache_statement): parsed and analyzed once per connection, and after five
// executions run on the server's generic plan, which cannot go stale because there is nothing
// for it to choose. It saves the 30–70 µs of parsing and planning each of them cost per
// execution. A statement that looks anything up by a value must not carry the
// mark: its cached generic plan would be the one made when the table was small.
const FixedPlan = "/* fixed plan */"

// Exec runs sql in the transaction, prepared when it is marked FixedPlan.
func (t *hookedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(ctx, sql, t.execArgs(sql, args)...)
}

// Query runs sql in the transaction, prepared when it is marked FixedPlan.
func (t *hookedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(ctx, sql, t.execArgs(sql, args)...)
}

// QueryRow runs sql in the transaction, prepared when it is marked FixedPlan.
func (t *hookedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(ctx, sql, t.execArgs(sql, args)...)
}

// execArgs puts pgx's cache_statement exec mode before args when sql is marked FixedPlan and
// the pool plans each execution; a pool whose URL chose its own exec mode (simple_protocol
// behind a transaction-mode pooler) keeps it for every statement.
func (t *hookedTx) execArgs(sql string, args []any) []any {
	if !strings.Contains(sql, FixedPlan) {
		return args
	}
	if t.prepare == 0 {
		t.prepare = -1
		if t.Tx.Conn().Config().DefaultQueryExecMode == pgx.QueryExecModeCacheDescribe {
			t.prepare = 1
		}
	}
	if t.prepare < 0 {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheStatement}, args...)
}

// AfterCommit registers hook to run right after db's transaction commits, in the goroutine that
// committed it; it never runs if the transaction rolls back or its commit fails. It reports
// false, registering nothing, when db is not a transaction WithTx or WithTxV began on a pool
// (a pool, or a savepoint, whose rows a later rollback to it could take away). hook must not
// block.
func AfterCommit(db any, hook func()) bool {
	tx, ok := db.(*hookedTx)
	if !ok {
		return false
	}
	tx.afterCommit = append(tx.afterCommit, hook)
	return true
}

// DefaultSerializationAttempts is how many times the services run a transaction that a
// deadlock or a serialization failure rolled back (RetrySerialization).
const DefaultSerializationAttempts = 5

// RetrySerialization runs fn, a whole transaction (WithTxV on a pool), up to attempts times
// while it fails with a deadlock or a serialization failure, pausing a little longer each time:
// such a failure says nothing about the work, which another attempt usually completes. Any
// other error, or a cancelled ctx, ends it. Retrying a savepoint would be useless: the
// failure aborts the whole transaction around it.
func RetrySerialization[T any](ctx context.Context, attempts int, fn func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := fn()
		if i >= attempts || !isSerializationFailure(err) {
			return v, err
		}
		pause := time.NewTimer(time.Duration(i) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return v, err
		case <-pause.C:
		}
	}
}

// isSerializationFailure: SQLSTATE 40001 (serialization_failure) or 40P01 (deadlock_detected).
func isSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// Interpret is what every adapter's error interpreter does with a driver's error before its
// own cases: no row becomes noRow (the adapter's not-found error), a database that cannot be
// reached is wrapped in unavailable (the adapter's unavailable error) with the driver's error
// kept behind it, for IsTransient and the log. Anything else, nil included, is returned as it
// is.
func Interpret(err, noRow, unavailable error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return noRow
	case IsUnavailable(err):
		return fmt.Errorf("%w: %w", unavailable, err)
	}
	return err
}

// IsUnavailable reports whether err means the database could not be reached or went away,
// as opposed to refusing a statement. A broken connection counts whatever else err wraps.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if isConnError(err) || pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// Class 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now.
	return slices.ContainsFunc(pgErrorCodes(err), func(code string) bool {
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
	})
}

// IsTransient reports whether err says the database is slow or away rather than that a
// statement is wrong: the connection failed or broke, a deadline passed, the statement was
// cancelled or timed out, a lock was not granted, the server is short of resources or
// shutting down, or a serialization failure or deadlock. Such a failure says nothing about
// the work, which succeeds once the database is back.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) ||
		isConnError(err) || pgconn.SafeToRetry(err) {
		return true
	}
	return slices.ContainsFunc(pgErrorCodes(err), func(code string) bool {
		switch code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources: disk full, out of memory, too many connections
			"57", // operator intervention: query cancelled (statement_timeout), admin or crash shutdown
			"58": // system error: I/O error
			return true
		}
		return code == "55P03" // lock not available (lock_timeout)
	})
}

// pgErrorCodes returns the SQLSTATE of every PostgreSQL error in err's tree, not only the first
// one errors.As would find: an error that wraps a statement's refusal and then the connection's
// loss (a failure and the failure to record it) is still a lost connection.
func pgErrorCodes(err error) []string {
	var codes []string
	var walk func(error)
	walk = func(err error) {
		if pgErr, ok := err.(*pgconn.PgError); ok && pgErr != nil && len(pgErr.Code) == 5 {
			codes = append(codes, pgErr.Code)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				walk(next)
			}
		case interface{ Unwrap() []error }:
			for _, next := range u.Unwrap() {
				walk(next)
			}
		}
	}
	walk(err)
	return codes
}

// isConnError reports a connection that could not be made, was closed, or broke, by the types
// and values the driver and the network wrap, never by the text of the error.
func isConnError(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || // the dial or the start-up failed
		errors.As(err, &netErr) || // a read or a write on the socket failed or timed out
		errors.Is(err, net.ErrClosed) || // the socket was closed under the connection
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || // the server closed the socket mid-message
		errors.Is(err, pgconn.ErrConnClosed) || // the driver had closed the connection already
		errors.Is(err, puddle.ErrClosedPool) // the pool was closed
}
