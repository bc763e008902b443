//go:build slow

package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/systemtest"
)

// gl serve with GL_READ_DATABASE_URL on a real hot standby of its database: its API reads are
// served by the standby and say so, /readyz shows the replica, and a standby whose replay is
// paused is left for the primary once it is past GL_READ_MAX_STALENESS.
func TestGLServesReadsFromItsStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	primary, err := systemtest.StartCluster(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = primary.Stop(ctx, false) })
	standby, err := primary.StartStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = standby.Stop(ctx, false) })

	dir := t.TempDir()
	bins, err := systemtest.Build(ctx, dir)
	require.NoError(t, err)
	keys, err := systemtest.MakeEventKeys(ctx, bins, filepath.Join(dir, "keys"))
	require.NoError(t, err)
	natsURL := envtest.NATSURL(t)
	readURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/gl?sslmode=disable&target_session_attrs=prefer-standby",
		primary.Port, standby.Port)
	glProcess, err := systemtest.Service("gl", bins.GL, "GL", primary.DatabaseURL("gl"), dir, slices.Concat([]string{
		"GL_READ_DATABASE_URL=" + readURL, "GL_READ_MAX_STALENESS=2s",
		"NATS_URL=" + natsURL, "EVENTS_NAMESPACE=" + envtest.Namespace(t, natsURL), envtest.StreamEnv, "LOG_FORMAT=json",
	}, keys.Env(contract.SourceGL)))
	require.NoError(t, err)
	require.NoError(t, glProcess.Start())
	t.Cleanup(func() {
		require.NoError(t, glProcess.Stop(20*time.Second))
		if t.Failed() {
			t.Logf("gl log tail:\n%s", glProcess.Tail(40))
		}
	})
	require.NoError(t, glProcess.WaitHealthy(ctx))
	api := systemtest.NewClient(glProcess.Addr)
	api.Key = createKey(t, glProcess)

	glDB := openPool(t, primary.DatabaseURL("gl"))
	ledger := postgres.NewLedger(glDB)
	post := func(transfer string) {
		t.Helper()
		require.NoError(t, database.WithTx(ctx, glDB, func(tx pgx.Tx) error {
			_, err := ledger.Post(ctx, tx, gl.Entry{
				ID: uuid.Must(uuid.NewV7()), EventID: uuid.Must(uuid.NewV7()).String(), TransferID: transfer,
				Currency: "USD", OccurredAt: time.Now().UTC(),
				Lines: []gl.Line{
					{AccountCode: "1010", Direction: gl.Debit, Amount: 100, WalletID: "w-a"},
					{AccountCode: "2010", Direction: gl.Credit, Amount: 100, WalletID: "w-b"},
				},
			})
			return err
		}))
	}
	// until reads the transfer's entries until they are one, read where source says.
	until := func(transfer, source string) systemtest.Response {
		t.Helper()
		for {
			res, err := api.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+transfer, nil, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.Status, string(res.Body))
			var body struct{ Entries []any }
			require.NoError(t, res.Decode(&body))
			if res.Header.Get("X-Read-Source") == source && len(body.Entries) == 1 {
				return res
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: last answer %s %v: %v", transfer, res.Header.Get("X-Read-Source"), body.Entries, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	readiness := func() map[string]string {
		t.Helper()
		res, err := api.Do(ctx, http.MethodGet, "/readyz", nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.Status, "the replica is a warning, never a failed probe: %s", res.Body)
		var body struct{ Checks map[string]string }
		require.NoError(t, res.Decode(&body))
		return body.Checks
	}

	first := uuid.Must(uuid.NewV7()).String()
	post(first)
	res := until(first, "replica")
	require.NotEmpty(t, res.Header.Get("X-Read-Staleness"))
	if checks := readiness(); checks != nil {
		require.Equal(t, "ok", checks["read_replica"])
	}

	conn, err := pgx.Connect(ctx, standby.DatabaseURL("gl"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	_, err = conn.Exec(ctx, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	second := uuid.Must(uuid.NewV7()).String()
	post(second)
	res = until(second, "primary")
	require.Equal(t, "0", res.Header.Get("X-Read-Staleness"))
	require.Equal(t, "warning", readiness()["read_replica"], "the paused standby is behind the bound")

	_, err = conn.Exec(ctx, "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
	until(second, "replica")
}
