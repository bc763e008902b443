// Package envtest gives each test its own PostgreSQL database and its own JetStream names, on the
// services named by TEST_DATABASE_URL and TEST_NATS_URL (default: the local ones). Where a
// service does not answer, it falls back to testcontainers when a Docker engine answers; under
// CI=true a missing service fails the test instead of skipping it.
package envtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	tcnats "github.com/testcontainers/testcontainers-go/modules/nats"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"walletgl/internal/database"
	"walletgl/internal/events"
)

const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultNATSURL     = "nats://127.0.0.1:4222"
)

// Containers started as a fallback live as long as the test binary: one per service.
var (
	pgOnce, natsOnce     sync.Once
	pgFallback, natsFall string
	pgErr, natsErr       error
)

// ServerURL returns the URL of a PostgreSQL server's maintenance database.
func ServerURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	if pgAnswers(defaultDatabaseURL) {
		return defaultDatabaseURL
	}
	pgOnce.Do(func() { pgFallback, pgErr = startPostgresContainer() })
	if pgErr != nil {
		missing(t, "PostgreSQL", pgErr)
	}
	return pgFallback
}

// DatabaseURL creates an empty database for this test and drops it when the test ends.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	server := ServerURL(t)
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("parse database url: %v", err)
	}
	u.Path = "/" + UniqueName(t, 40)
	dbURL := u.String()
	ctx := context.Background()
	if err := database.EnsureExists(ctx, dbURL); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := database.Drop(context.Background(), dbURL); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	return dbURL
}

// MigratedPool creates a database for this test, applies the service's migrations ("wallet" or
// "gl") and returns a pool on it, closed when the test ends.
func MigratedPool(t testing.TB, service string) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := DatabaseURL(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, dbURL, database.ServiceMaxConns)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := database.Migrate(ctx, pool, service); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return pool, dbURL
}

// NATSURL returns the URL of a JetStream server shared by tests; use Namespace to keep names apart.
func NATSURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	if natsAnswers(defaultNATSURL) {
		return defaultNATSURL
	}
	natsOnce.Do(func() { natsFall, natsErr = startNATSContainer() })
	if natsErr != nil {
		missing(t, "NATS", natsErr)
	}
	return natsFall
}

// Namespace returns a name prefix for this test's streams and subjects and deletes every stream
// that carries it when the test ends.
func Namespace(t testing.TB, natsURL string) string {
	t.Helper()
	ns := "t" + strings.ToLower(UniqueName(t, 24))
	t.Cleanup(func() { deleteStreams(natsURL, ns) })
	return ns
}

// StreamMaxBytes is the size limit of a test's streams. A stream's limit is reserved from the
// broker's store when the stream is created, and many tests share one broker at once: the
// services' default would exhaust it.
const StreamMaxBytes = 16 << 20

// StreamEnv is the service setting that gives a test's streams StreamMaxBytes.
const StreamEnv = "EVENTS_STREAM_MAX_BYTES=16777216"

// Topology is the JetStream layout of a test: its own namespace (deleted when the test ends)
// and streams of StreamMaxBytes.
func Topology(t testing.TB, natsURL string) events.Topology {
	t.Helper()
	return events.Topology{Namespace: Namespace(t, natsURL), MaxBytes: StreamMaxBytes}
}

func deleteStreams(natsURL, ns string) {
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	var mine []string
	for name := range names.Name() {
		if strings.HasPrefix(strings.ToLower(name), ns) {
			mine = append(mine, name)
		}
	}
	for _, name := range mine {
		_ = js.DeleteStream(ctx, name)
	}
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// UniqueName is a lower-case identifier made of the test's name and a random suffix.
func UniqueName(t testing.TB, max int) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if room := max - len(suffix) - 1; len(base) > room {
		base = base[len(base)-room:]
	}
	return strings.Trim(base, "_") + "_" + suffix
}

func missing(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not reachable and no container could be started: %v", service, err)
	}
	t.Skipf("%s is not reachable and no container could be started: %v", service, err)
}

func pgAnswers(dbURL string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return false
	}
	_ = conn.Close(ctx)
	return true
}

func natsAnswers(natsURL string) bool {
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

func dockerAnswers(ctx context.Context) error {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("docker provider: %w", err)
	}
	defer provider.Close()
	return provider.Health(ctx)
}

func startPostgresContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := dockerAnswers(ctx); err != nil {
		return "", err
	}
	ctr, err := tcpostgres.Run(ctx, "postgres:16-alpine",
		tcpostgres.WithDatabase("postgres"), tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"), tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("start postgres container: %w", err)
	}
	return ctr.ConnectionString(ctx, "sslmode=disable")
}

func startNATSContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := dockerAnswers(ctx); err != nil {
		return "", err
	}
	ctr, err := tcnats.Run(ctx, "nats:2.10", testcontainers.WithCmd("-js"))
	if err != nil {
		return "", fmt.Errorf("start nats container: %w", err)
	}
	return ctr.ConnectionString(ctx)
}
