package database_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
)

// An HA deployment's URL lists every server of the cluster; whatever the code derives from it
// (another database's URL, the owner's identity) keeps every one of them.
func TestAMultiHostURLKeepsEveryHostWhereverItIsDerived(t *testing.T) {
	t.Parallel()
	const owner = "postgres://gl_owner:secret@pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5433/gl?sslmode=verify-full&target_session_attrs=read-write"
	derived := database.WithDatabase(owner, "gl", "gl_replay_20260101t000000")
	require.Equal(t, "postgres://gl_owner:secret@pg-1.internal:5432,pg-2.internal:5432,pg-3.internal:5433/gl_replay_20260101t000000?sslmode=verify-full&target_session_attrs=read-write", derived)

	id, err := database.IdentityOf(owner)
	require.NoError(t, err)
	require.Equal(t, database.Identity{Database: "gl", User: "gl_owner"}, id)

	for in, want := range map[string]string{
		"postgres://u@[::1]:5432,[::2]:5433/gl?sslmode=disable": "postgres://u@[::1]:5432,[::2]:5433/gl_copy?sslmode=disable",
		"postgresql://u:p%40ss@pg-1,pg-2/gl":                    "postgresql://u:p%40ss@pg-1,pg-2/gl_copy",
		"postgres://u@pg-1:5432":                                "postgres://u@pg-1:5432/gl_copy",
	} {
		require.Equal(t, want, database.WithDatabase(in, "gl", "gl_copy"), in)
	}

	kv := database.WithDatabase("host=pg-1,pg-2 port=5432,5433 dbname=gl user=gl_owner target_session_attrs=read-write", "gl", "gl_copy")
	require.Equal(t, "host=pg-1,pg-2 port=5432,5433 dbname=gl_copy user=gl_owner target_session_attrs=read-write", kv)
}

// Created, migrated, used and dropped through a multi-host URL whose first server is lost: the
// driver goes on to the next one and connects to the one that takes writes.
func TestADatabaseIsServedThroughAMultiHostURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	single := envtest.DatabaseURL(t)
	u, err := url.Parse(single)
	require.NoError(t, err)
	u.Path += "_ha"
	multi := envtest.MultiHost(t, u.String())

	require.NoError(t, database.EnsureExists(ctx, multi))
	t.Cleanup(func() { _ = database.Drop(context.Background(), multi) })
	pool, err := database.Open(ctx, multi, 2)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, database.Migrate(ctx, pool, "wallet"))
	require.NoError(t, database.MigrationsCurrent(ctx, pool, "wallet"))
	var readOnly string
	require.NoError(t, pool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly))
	require.Equal(t, "off", readOnly)

	tool, err := database.OpenToolReadOnly(ctx, multi)
	require.NoError(t, err, "a read-only pool connects through a read-write multi-host URL")
	defer tool.Close()
	require.NoError(t, tool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly))
	require.Equal(t, "on", readOnly, "and its sessions are read-only once connected")

	pool.Close()
	tool.Close()
	require.NoError(t, database.Drop(ctx, multi))
	id, err := database.IdentityOf(single)
	require.NoError(t, err)
	admin, err := database.Open(ctx, database.WithDatabase(single, id.Database, "postgres"), 1)
	require.NoError(t, err)
	defer admin.Close()
	var exists bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", strings.TrimPrefix(u.Path, "/")).Scan(&exists))
	require.False(t, exists, "dropped through the multi-host URL")
}
