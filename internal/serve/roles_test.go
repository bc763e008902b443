package serve_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/config"
	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	glpostgres "walletgl/internal/gl/postgres"
	"walletgl/internal/serve"
	"walletgl/internal/wallet"
	walletpostgres "walletgl/internal/wallet/postgres"
)

// logBuffer is a logger whose lines the test reads back.
func logBuffer() (zerolog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return zerolog.New(zerolog.SyncWriter(&buf)), &buf
}

// warnings are the warn lines in buf, but the one about the server's autovacuum, which says
// how the test's server is set up (autovacuumWarnings).
func warnings(buf *bytes.Buffer) []string {
	var out []string
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `"level":"warn"`) && !strings.Contains(line, `"autovacuum":false`) {
			out = append(out, line)
		}
	}
	return out
}

// autovacuumWarnings are the warn lines in buf about the server's autovacuum.
func autovacuumWarnings(buf *bytes.Buffer) []string {
	var out []string
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, `"autovacuum":false`) {
			out = append(out, line)
		}
	}
	return out
}

// The service warns at start-up when its server runs with autovacuum off (as the tests'
// server may), and says nothing of it otherwise (TestServicesConnectWithVerifyFull's private
// cluster runs with it on).
func TestServeWarnsWhenTheServerRunsWithoutAutovacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := envtest.DatabaseURL(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	var setting string
	require.NoError(t, conn.QueryRow(ctx, "SHOW autovacuum").Scan(&setting))
	require.NoError(t, conn.Close(ctx))

	log, buf := logBuffer()
	pool, err := serve.OpenDatabase(ctx, serve.Database{URL: dbURL, MigrateOnStart: true}, "wallet", log)
	require.NoError(t, err)
	pool.Close()
	if setting == "on" {
		require.Empty(t, autovacuumWarnings(buf), "%s", buf)
		return
	}
	got := autovacuumWarnings(buf)
	require.Len(t, got, 1, "%s", buf)
	require.Contains(t, got[0], "autovacuum off")
}

// openAsRuntimeRole creates the service's database as the server's user (the owner), migrates
// it and grants a role of the test's, as serve does with a migrate URL, and returns the
// service's pool, which connects as that role, and the owner's URL.
func openAsRuntimeRole(t *testing.T, service string) (*pgxpool.Pool, string) {
	t.Helper()
	ownerURL := envtest.DatabaseURL(t)
	d := serve.Database{URL: envtest.RoleURL(t, ownerURL), MigrateURL: ownerURL, MigrateOnStart: true}
	log, buf := logBuffer()
	pool, err := serve.OpenDatabase(context.Background(), d, service, log)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Empty(t, warnings(buf), "a runtime role is neither a superuser nor an owner")
	require.Contains(t, buf.String(), "runtime role granted the service's privileges")
	return pool, ownerURL
}

// requirePermissionDenied runs each statement on pool and requires PostgreSQL to refuse it for
// lack of a privilege (SQLSTATE 42501), not for a trigger or a constraint.
func requirePermissionDenied(t *testing.T, pool *pgxpool.Pool, statements ...string) {
	t.Helper()
	for _, stmt := range statements {
		_, err := pool.Exec(context.Background(), stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "%s", stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %v", stmt, err)
		require.True(t, strings.HasPrefix(pgErr.Message, "permission denied") || strings.HasPrefix(pgErr.Message, "must be owner"),
			"%s: %v", stmt, err)
	}
}

func TestTheGLPostsAsItsRuntimeRoleAndCannotRewriteTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := openAsRuntimeRole(t, "gl")
	ledger := glpostgres.NewLedger(pool)

	require.NoError(t, gl.DefaultPostingRule.Check(ctx, ledger))
	_, err := ledger.AddAccount(ctx, gl.Account{Code: "4010", Name: "Fees", Type: gl.Revenue, NormalBalance: gl.Credit})
	require.NoError(t, err, "gl accounts add runs as the runtime role")
	entry := gl.Entry{
		ID: uuid.Must(uuid.NewV7()), EventID: uuid.NewString(), TransferID: uuid.NewString(), Currency: "USD",
		OccurredAt: time.Now().UTC(),
		Lines: []gl.Line{
			{AccountCode: "1010", Direction: gl.Debit, Amount: 500, WalletID: "bank"},
			{AccountCode: "2010", Direction: gl.Credit, Amount: 500, WalletID: "alice"},
		},
	}
	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		created, err := ledger.Post(ctx, tx, entry)
		require.NoError(t, err)
		require.True(t, created)
		return err
	})
	require.NoError(t, err)
	got, err := ledger.EntriesByTransfer(ctx, entry.TransferID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	// The posting rules: read by every batch under their lock, and set by gl rules set.
	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := ledger.PostingRules(ctx, tx)
		return err
	})
	require.NoError(t, err, "a batch reads the posting rules as the runtime role")
	set, err := ledger.SetRule(ctx, gl.Rule{EventType: "TransferCompleted.v2", Kind: "deposit", EffectiveFrom: time.Now().Add(time.Hour),
		PostingRule: gl.PostingRule{DebitAccount: "1010", CreditAccount: "2010"}})
	require.NoError(t, err, "gl rules set runs as the runtime role")
	_, err = ledger.WithdrawRule(ctx, set)
	require.NoError(t, err, "gl rules withdraw runs as the runtime role")
	_, err = pool.Exec(ctx, "DELETE FROM posting_rules")
	var guard *pgconn.PgError
	require.ErrorAs(t, err, &guard)
	require.Equal(t, "23001", guard.Code, "the runtime role may delete a rule not in effect, never one in effect: %v", err)
	_, _, err = auth.NewKeys(pool, auth.GLScopes).Create(ctx, auth.Actor{Name: "cli:test"}, "mine", []auth.Scope{auth.Admin})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the runtime role makes no key")
	require.Equal(t, "42501", pgErr.Code, "%v", err)

	requirePermissionDenied(t, pool,
		"UPDATE journal_lines SET amount = amount + 1",
		"DELETE FROM journal_entries",
		"TRUNCATE journal_lines",
		"TRUNCATE journal_entries CASCADE",
		"DELETE FROM accounts",
		"UPDATE posting_rules SET debit_account = '2010'",
		"TRUNCATE posting_rules",
		"CREATE TABLE shadow_ledger (id int)",
		"ALTER TABLE journal_lines DISABLE TRIGGER journal_lines_append_only",
		"DROP TABLE journal_lines",
		"UPDATE audit_log SET actor = 'someone else'",
		"DELETE FROM audit_log",
		"SELECT * FROM goose_gl_version",
		"SELECT * FROM gl_postings",
	)
}

// Keys are written as the owner (keys create and revoke, with the migrate URL); the runtime role
// authenticates with them and records their last use, and can neither give a key a scope nor
// make, revoke or remove one.
func TestTheRuntimeRoleReadsAPIKeysAndCannotRewriteThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, ownerURL := openAsRuntimeRole(t, "wallet")
	owner, err := database.Open(ctx, ownerURL, 2)
	require.NoError(t, err)
	t.Cleanup(owner.Close)

	operator := auth.Actor{Name: "cli:test"}
	key, secret, err := auth.NewKeys(owner, auth.WalletScopes).Create(ctx, operator, "reader", []auth.Scope{"wallets:read"})
	require.NoError(t, err, "keys create runs as the owner, and audits")
	var audited int
	require.NoError(t, owner.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE action = 'key.create' AND target = $1", key.ID.String()).Scan(&audited))
	require.Equal(t, 1, audited)

	keys := auth.NewKeys(pool, auth.WalletScopes)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- keys.Run(runCtx) }()
	p, err := keys.Authenticate(ctx, secret)
	require.NoError(t, err, "the runtime role reads the keys")
	require.Equal(t, key.ID, p.KeyID)
	cancel()
	require.NoError(t, <-done, "and records their last use as it stops")
	var used bool
	require.NoError(t, owner.QueryRow(ctx, "SELECT last_used_at IS NOT NULL FROM api_keys WHERE id = $1", key.ID).Scan(&used))
	require.True(t, used)

	requirePermissionDenied(t, pool,
		"UPDATE api_keys SET scopes = '{admin}'",
		"UPDATE api_keys SET revoked_at = NULL",
		"UPDATE api_keys SET secret_hash = secret_hash",
		"INSERT INTO api_keys (id, name, secret_hash, scopes) VALUES (gen_random_uuid(), 'x', sha256('x'), '{admin}')",
		"DELETE FROM api_keys",
		"TRUNCATE api_keys",
	)
	_, err = keys.Revoke(ctx, operator, key.ID)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the runtime role revokes no key")
	require.Equal(t, "42501", pgErr.Code, "%v", err)
}

func TestTheWalletTransfersAsItsRuntimeRoleAndCannotReachTheGL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := openAsRuntimeRole(t, "wallet")
	store := walletpostgres.NewStore(pool, walletpostgres.Options{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	for _, w := range []wallet.Wallet{{ID: "bank", Currency: "USD", AllowNegative: true}, {ID: "alice", Currency: "USD"}} {
		_, err := store.CreateWallet(ctx, w)
		require.NoError(t, err)
	}
	req := wallet.TransferRequest{IdempotencyKey: "k1", FromWalletID: "bank", ToWalletID: "alice", Amount: 250, Currency: "USD"}
	tr, replayed, err := store.CreateTransfer(ctx, req)
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := store.CreateTransfer(ctx, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, tr.ID, again.ID)
	alice, err := store.GetWallet(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, int64(250), alice.Balance)

	// Holds: placed, captured (a transfer naming its hold), voided, expired, all as the runtime role.
	place := func(key string) wallet.Hold {
		h, _, err := store.PlaceHold(ctx, wallet.HoldRequest{IdempotencyKey: key, WalletID: "alice", Amount: 10, ExpiresIn: time.Hour})
		require.NoError(t, err)
		return h
	}
	captured, voided := place("h1"), place("h2")
	_, _, err = store.CaptureHold(ctx, wallet.CaptureRequest{IdempotencyKey: "c1", HoldID: captured.ID, ToWalletID: "bank", Amount: 5})
	require.NoError(t, err)
	_, err = store.VoidHold(ctx, voided.ID)
	require.NoError(t, err)
	_, err = store.ExpireHolds(ctx, 10)
	require.NoError(t, err)

	requirePermissionDenied(t, pool,
		"UPDATE holds SET amount = 1",
		"DELETE FROM holds",
		"UPDATE transfers SET amount = 1",
		"DELETE FROM transfers",
		"DELETE FROM wallets",
		"TRUNCATE outbox",
		"CREATE TABLE t (id int)",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"SELECT * FROM reconcile_transfers_v1",
		"SELECT * FROM reconcile_transfers_v2",
	)

	// The GL's database keeps every other role out, the wallet's included.
	_, glOwnerURL := openAsRuntimeRole(t, "gl")
	walletURL := pool.Config().ConnString()
	walletDB, err := database.IdentityOf(walletURL)
	require.NoError(t, err)
	glDB, err := database.IdentityOf(glOwnerURL)
	require.NoError(t, err)
	_, err = pgx.Connect(ctx, database.WithDatabase(walletURL, walletDB.Database, glDB.Database))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42501", pgErr.Code, "%v", err)
}

func TestServeWarnsWhenItRunsAsASuperuserOrAnOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("the server's superuser, which also migrates: nothing granted", func(t *testing.T) {
		t.Parallel()
		log, buf := logBuffer()
		pool, err := serve.OpenDatabase(ctx, serve.Database{URL: envtest.DatabaseURL(t), MigrateOnStart: true}, "gl", log)
		require.NoError(t, err)
		pool.Close()
		got := warnings(buf)
		require.Len(t, got, 2, "%s", buf)
		require.Contains(t, got[0], "nothing granted; set GL_MIGRATE_DATABASE_URL")
		require.Contains(t, got[1], "superuser")
	})

	t.Run("the database's owner", func(t *testing.T) {
		t.Parallel()
		dbURL := envtest.DatabaseURL(t)
		ownerURL := envtest.RoleURL(t, dbURL)
		owner, err := database.IdentityOf(ownerURL)
		require.NoError(t, err)
		admin, err := pgx.Connect(ctx, dbURL)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{owner.Database}.Sanitize()+" OWNER TO "+pgx.Identifier{owner.User}.Sanitize())
		require.NoError(t, err)
		require.NoError(t, admin.Close(ctx))

		log, buf := logBuffer()
		pool, err := serve.OpenDatabase(ctx, serve.Database{URL: ownerURL, MigrateOnStart: true}, "wallet", log)
		require.NoError(t, err)
		pool.Close()
		got := warnings(buf)
		require.Len(t, got, 2, "%s", buf)
		require.Contains(t, got[1], "runs as an owner of its database")
	})
}

func TestMigrationsAsTheRuntimeRoleSayWhatToSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, ownerURL := openAsRuntimeRole(t, "gl")
	runtimeURL := pool.Config().ConnString()
	log, _ := logBuffer()

	err := serve.Migrate(ctx, serve.Database{URL: runtimeURL}, "gl", log)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr) && pgErr.Code == "42501", "%v", err)
	require.ErrorContains(t, err, "set GL_MIGRATE_DATABASE_URL, or GL_MIGRATE_ON_START=false and run migrate first")

	// Without migrations at start, serve needs the runtime URL alone.
	served, err := serve.OpenDatabase(ctx, serve.Database{URL: runtimeURL}, "gl", log)
	require.NoError(t, err)
	served.Close()

	// Migrating again, as a new version of the service does, keeps the grants.
	require.NoError(t, serve.Migrate(ctx, serve.Database{URL: runtimeURL, MigrateURL: ownerURL}, "gl", log))
	_, err = glpostgres.NewLedger(pool).Accounts(ctx)
	require.NoError(t, err)
}

func TestAMigrateURLNamesTheServicesDatabase(t *testing.T) {
	t.Parallel()
	d := serve.Database{
		URL:        "postgres://gl_app@db.internal:5432/gl?sslmode=verify-full",
		MigrateURL: "postgres://gl_owner@db.internal:5432/gl?sslmode=verify-full",
	}
	require.NoError(t, d.Validate("GL_DATABASE_URL", "GL_MIGRATE_DATABASE_URL"))
	d.MigrateURL = "postgres://gl_owner@db.internal:5432/wallet"
	require.EqualError(t, d.Validate("GL_DATABASE_URL", "GL_MIGRATE_DATABASE_URL"),
		`GL_MIGRATE_DATABASE_URL names database "wallet" and GL_DATABASE_URL database "gl": they must name the same one`)

	// An HA cluster's multi-host URLs, in either of PostgreSQL's forms.
	const hosts = "pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5432"
	d = serve.Database{
		URL:        "postgres://gl_app@" + hosts + "/gl?target_session_attrs=read-write",
		MigrateURL: "host=pg-1.internal,pg-2.internal,pg-3.internal port=5432 dbname=gl user=gl_owner target_session_attrs=read-write",
	}
	require.NoError(t, d.Validate("GL_DATABASE_URL", "GL_MIGRATE_DATABASE_URL"))
	d.MigrateURL = "postgres://gl_owner@" + hosts + "/wallet?target_session_attrs=read-write"
	require.ErrorContains(t, d.Validate("GL_DATABASE_URL", "GL_MIGRATE_DATABASE_URL"), "they must name the same one")
}

func TestTheSettingsTakeAMultiHostDatabaseURL(t *testing.T) {
	t.Parallel()
	const url = "postgres://wallet_app@pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5432/wallet?target_session_attrs=read-write"
	env := map[string]string{
		"WALLET_DATABASE_URL":         url,
		"WALLET_MIGRATE_DATABASE_URL": "postgres://wallet_owner@pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5432/wallet?target_session_attrs=read-write",
	}
	var c serve.Settings
	s := config.NewSet("test", func(k string) string { return env[k] }, io.Discard)
	serve.BindSettings(s, &c, "WALLET", "wallet", "127.0.0.1:8080")
	require.NoError(t, s.Parse(nil))
	require.NoError(t, c.Validate())
	require.Equal(t, url, c.Database())
}
