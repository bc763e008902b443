package database_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
)

// ownerPool migrates a new database for service as the server's user (the owner) and returns
// a pool on it as that user, and the database's URL as a new role of the test's.
func ownerPool(t *testing.T, service string) (owner *pgxpool.Pool, runtimeURL string) {
	t.Helper()
	owner, dbURL := envtest.MigratedPool(t, service)
	return owner, envtest.RoleURL(t, dbURL)
}

func userOf(t *testing.T, dbURL string) string {
	t.Helper()
	id, err := database.IdentityOf(dbURL)
	require.NoError(t, err)
	return id.User
}

// tablePrivileges are role's privileges on the tables and views of the schema, as
// "table: PRIV,PRIV" in table order.
func tablePrivileges(t *testing.T, pool *pgxpool.Pool, role string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT table_name || ': ' || string_agg(privilege_type, ',' ORDER BY privilege_type)
FROM information_schema.role_table_grants
WHERE grantee = $1 AND table_schema = 'public'
GROUP BY table_name
ORDER BY table_name COLLATE "C"`, role)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return got
}

// columnUpdates are the columns role may UPDATE through a column-level grant, as "table.column".
func columnUpdates(t *testing.T, pool *pgxpool.Pool, role string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT c.relname || '.' || a.attname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'public'::regnamespace AND a.attacl IS NOT NULL AND a.attnum > 0
  AND has_column_privilege($1, c.oid, a.attnum, 'UPDATE')
ORDER BY 1`, role)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return got
}

func TestGrantGivesTheRuntimeRoleExactlyWhatTheServiceNeeds(t *testing.T) {
	t.Parallel()
	shared := []string{
		"api_keys: SELECT",
		"audit_log: INSERT,SELECT",
		"inbox: DELETE,INSERT,SELECT,UPDATE",
		"outbox: DELETE,INSERT,SELECT,UPDATE",
	}
	for _, tc := range []struct {
		service string
		own     []string
	}{
		{"wallet", []string{"batch_reversals: INSERT,SELECT", "holds: INSERT,SELECT", "refusals: DELETE,INSERT,SELECT,UPDATE", "transfer_batches: INSERT,SELECT", "transfers: INSERT,SELECT", "wallets: INSERT,SELECT,UPDATE"}},
		{"gl", []string{"accounts: INSERT,SELECT", "adjustments: INSERT,SELECT", "balance_checkpoints: DELETE,INSERT,SELECT", "journal_entries: INSERT,SELECT", "journal_lines: INSERT,SELECT", "posting_rules: DELETE,INSERT,SELECT"}},
	} {
		t.Run(tc.service, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			owner, runtimeURL := ownerPool(t, tc.service)
			role := userOf(t, runtimeURL)
			want := append(append([]string(nil), shared...), tc.own...)
			slices.Sort(want)

			require.NoError(t, database.Grant(ctx, owner, tc.service, role))
			require.Equal(t, want, tablePrivileges(t, owner, role))
			require.Contains(t, columnUpdates(t, owner, role), "api_keys.last_used_at",
				"the runtime role records a key's last use, and changes nothing else of a key")
			require.NotContains(t, columnUpdates(t, owner, role), "api_keys.scopes")

			// A privilege granted by hand, or by an earlier version, does not survive a migrate.
			for _, stmt := range []string{
				"GRANT ALL ON ALL TABLES IN SCHEMA public TO " + pgx.Identifier{role}.Sanitize(),
				"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + pgx.Identifier{role}.Sanitize(),
				"GRANT CREATE ON SCHEMA public TO " + pgx.Identifier{role}.Sanitize(),
			} {
				_, err := owner.Exec(ctx, stmt)
				require.NoError(t, err)
			}
			require.NoError(t, database.Grant(ctx, owner, tc.service, role))
			require.Equal(t, want, tablePrivileges(t, owner, role))
			var sequences int
			require.NoError(t, owner.QueryRow(ctx, `
SELECT count(*) FROM information_schema.role_usage_grants WHERE grantee = $1 AND object_type = 'SEQUENCE'`, role).Scan(&sequences))
			require.Zero(t, sequences, "the identity columns need no privilege on their sequences")

			p, err := database.CheckPrivileges(ctx, openAs(t, runtimeURL))
			require.NoError(t, err)
			require.Equal(t, database.Privileges{User: role}, p, "neither superuser, nor owner, nor allowed DDL")
		})
	}
}

func TestGrantRefusesARoleThatDoesNotExist(t *testing.T) {
	t.Parallel()
	owner, _ := envtest.MigratedPool(t, "gl")
	err := database.Grant(context.Background(), owner, "gl", "no_such_role_"+strings.ToLower(t.Name()))
	require.ErrorContains(t, err, "does not exist: create it first")
}

func TestCheckPrivilegesTellsASuperuserAndAnOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := envtest.DatabaseURL(t)
	p, err := database.CheckPrivileges(ctx, openAs(t, dbURL))
	require.NoError(t, err)
	require.True(t, p.Superuser)

	// The owner of the database owns its schema (PostgreSQL 15: public belongs to
	// pg_database_owner) and what it creates there.
	ownerURL := envtest.RoleURL(t, dbURL)
	owner := userOf(t, ownerURL)
	admin := openAs(t, dbURL)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+
		" OWNER TO "+pgx.Identifier{owner}.Sanitize())
	require.NoError(t, err)
	p, err = database.CheckPrivileges(ctx, openAs(t, ownerURL))
	require.NoError(t, err)
	require.Equal(t, database.Privileges{User: owner, Owner: true, CanCreate: true}, p)
}

func openAs(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Open(context.Background(), dbURL, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
