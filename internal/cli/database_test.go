package cli

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

func TestReadOnlyURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u@h/db": "postgres://u@h/db?default_transaction_read_only=on",
		"postgresql://u@h1:5432,h2:5432/db?sslmode=disable": "postgresql://u@h1:5432,h2:5432/db?sslmode=disable&default_transaction_read_only=on",
		"host=h dbname=db": "host=h dbname=db default_transaction_read_only=on",
	} {
		require.Equal(t, want, readOnly(in))
	}
}

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

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Path += "_missing"
	_, err = OpenDatabase(ctx, u.String(), ReadOnly)
	require.ErrorContains(t, err, u.Path[1:]+`" does not exist`, "a missing database is an error: it is never created")
}
