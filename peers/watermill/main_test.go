package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The services come from TEST_DATABASE_URL and TEST_NATS_URL, with the local defaults; a
// missing service skips the test, except under CI=true where it fails it.
const (
	defaultTestDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultTestNATSURL     = "nats://127.0.0.1:4222"
)

func TestDrainPublishesEveryRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows = 500

	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-rows", "500", "-database-url", b.databaseURL, "-nats-url", b.natsURL,
		"-stream", b.stream, "-keep"}, noEnv, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	t.Cleanup(func() { _ = b.js.DeleteStream(context.Background(), b.stream) })

	require.Equal(t, 1, strings.Count(stdout.String(), "\n"), "one line on stdout: %q", stdout.String())
	var res Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res))
	require.Equal(t, rows, res.Rows)
	require.Positive(t, res.Seconds)
	require.Positive(t, res.EventsPerSecond)

	// The ids the application published, from the forwarder's envelopes in the SQL table.
	conn := b.conn(t)
	written, err := pgx.CollectRows(mustQuery(t, conn, `SELECT payload->>'uuid' FROM `+schema.MessagesTable(namesFor(b.stream).topic)), pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, written, rows)

	stream, err := b.js.Stream(t.Context(), b.stream)
	require.NoError(t, err)
	info, err := stream.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(rows), info.State.Msgs)
	seen := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		msg, err := stream.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		id := msg.Header.Get(nats.MsgIdHdr)
		require.Equal(t, id, msg.Header.Get(wmnats.WatermillUUIDHdr), "Nats-Msg-Id is the message's UUID")
		require.False(t, seen[id], "message %s published twice", id)
		seen[id] = true
		require.Len(t, msg.Data, DefaultPayloadBytes)
		var env struct{ ID string }
		require.NoError(t, json.Unmarshal(msg.Data, &env))
		require.Equal(t, id, env.ID, "the payload is the application's, unwrapped")
	}
	require.ElementsMatch(t, written, keys(seen))
}

func TestRunRemovesItsStreamAndTables(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-rows", "20", "-database-url", b.databaseURL, "-nats-url", b.natsURL, "-stream", b.stream},
		noEnv, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	_, err = b.js.Stream(t.Context(), b.stream)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	var tables int
	require.NoError(t, b.conn(t).QueryRow(t.Context(),
		`SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'watermill%'`).Scan(&tables))
	require.Zero(t, tables)
}

func TestRunRefusesAnExistingStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: b.stream, Subjects: []string{"peers.watermill.test." + b.stream}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.js.DeleteStream(context.Background(), b.stream) })

	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"-rows", "20", "-database-url", b.databaseURL, "-nats-url", b.natsURL, "-stream", b.stream},
		noEnv, &stdout, &stderr)
	require.ErrorContains(t, err, "exists")
	require.Empty(t, stdout.String())
	_, err = b.js.Stream(t.Context(), b.stream)
	require.NoError(t, err, "someone else's stream stays")
}

func TestFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a run needs a database", []string{}, "-database-url is required"},
		{"a backlog has at least one row", []string{"-database-url", "x", "-rows", "0"}, "-rows"},
		{"a stream name has no dot", []string{"-database-url", "x", "-stream", "A.B"}, "-stream"},
		{"a payload holds at least the envelope", []string{"-database-url", "x", "-payload-bytes", "10"}, "-payload-bytes"},
		{"a timeout is positive", []string{"-database-url", "x", "-timeout", "0s"}, "-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tc.args, noEnv, &stdout, &stderr)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, stdout.String())
		})
	}
}

func TestEnvelopeHasTheRequestedSize(t *testing.T) {
	t.Parallel()
	for _, size := range []int{MinPayloadBytes, DefaultPayloadBytes, 4096} {
		b := envelope("0193a5c1-7f00-7000-8000-000000000000", time.Now(), size)
		require.Len(t, b, size)
		require.True(t, json.Valid(b))
	}
}

type testBundle struct {
	databaseURL string
	natsURL     string
	stream      string
	js          jetstream.JetStream
}

// setup gives the test a database and a stream name of its own; the database is dropped at
// the end.
func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := t.Context()
	suffix := randomHex(t)

	adminURL := envOr("TEST_DATABASE_URL", defaultTestDatabaseURL)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		unavailable(t, "PostgreSQL at "+adminURL, err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	db := "peer_watermill_test_" + suffix
	_, err = admin.Exec(ctx, "CREATE DATABASE "+db)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		require.NoError(t, err)
	})
	u, err := url.Parse(adminURL)
	require.NoError(t, err)
	u.Path = "/" + db

	natsURL := envOr("TEST_NATS_URL", defaultTestNATSURL)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		unavailable(t, "NATS at "+natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	return &testBundle{databaseURL: u.String(), natsURL: natsURL, stream: "PEER_WM_TEST_" + strings.ToUpper(suffix), js: js}
}

func (b *testBundle) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), b.databaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func unavailable(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s does not answer: %v", what, err)
}

func mustQuery(t *testing.T, conn *pgx.Conn, sql string) pgx.Rows {
	t.Helper()
	rows, err := conn.Query(t.Context(), sql)
	require.NoError(t, err)
	return rows
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func noEnv(string) string { return "" }
