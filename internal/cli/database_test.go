package cli

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

func TestOpenDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := envtest.DatabaseURL(t)

	rw, err := OpenDatabase(ctx, dbURL, ReadWrite)
	require.NoError(t, err)
	defer rw.Close()
	_, err = rw.Exec(ctx, `CREATE TABLE things (id int)`)
	require.NoError(t, err)

	ro, err := OpenDatabase(ctx, dbURL, ReadOnly)
	require.NoError(t, err)
	defer ro.Close()
	var n int
	require.NoError(t, ro.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&n))
	_, err = ro.Exec(ctx, `INSERT INTO things VALUES (1)`)
	require.ErrorContains(t, err, "read-only transaction", "a reading command cannot write, whatever its code does")
	tx, err := ro.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO things VALUES (1)`)
	require.ErrorContains(t, err, "read-only transaction")

	// A multi-host URL that asks for the server taking writes: a reading command's sessions
	// are read-only only once connected, or no server would pass for the primary.
	multi, err := OpenDatabase(ctx, envtest.MultiHost(t, dbURL), ReadOnly)
	require.NoError(t, err, "a reading command connects through a multi-host read-write URL")
	defer multi.Close()
	require.NoError(t, multi.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&n))
	_, err = multi.Exec(ctx, `INSERT INTO things VALUES (1)`)
	require.ErrorContains(t, err, "read-only transaction")
	written, err := OpenDatabase(ctx, envtest.MultiHost(t, dbURL), ReadWrite)
	require.NoError(t, err)
	defer written.Close()
	_, err = written.Exec(ctx, `INSERT INTO things VALUES (2)`)
	require.NoError(t, err, "a writing command writes through it")

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Path += "_missing"
	_, err = OpenDatabase(ctx, u.String(), ReadOnly)
	require.ErrorContains(t, err, u.Path[1:]+`" does not exist`, "a missing database is an error: it is never created")
}
