// Package serve is what the two service processes share around their own parts: opening the
// database (created and migrated when needed) and the NATS connection, running the HTTP server
// and the background workers, and shutting down in order on a signal.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
)

// Database is where a service keeps its data: the URL it runs with, whose user is its runtime
// role, and the URL its migrations run with, the owner's (empty: URL, and no grants).
type Database struct {
	URL        string
	MigrateURL string
	// MigrateOnStart has OpenDatabase create and migrate the database first (Migrate); without
	// it the database must be ready (the migrate command) and the service needs no owner's URL.
	MigrateOnStart bool
}

func (d Database) migrateURL() string {
	if d.MigrateURL == "" {
		return d.URL
	}
	return d.MigrateURL
}

// Validate reports a migrate URL that names another database than URL, where the grants would
// miss the service's tables (urlVar and migrateVar name the settings).
func (d Database) Validate(urlVar, migrateVar string) error {
	if d.MigrateURL == "" {
		return nil
	}
	runtime, err := database.IdentityOf(d.URL)
	if err != nil {
		return fmt.Errorf("%s: %w", urlVar, err)
	}
	owner, err := database.IdentityOf(d.MigrateURL)
	if err != nil {
		return fmt.Errorf("%s: %w", migrateVar, err)
	}
	if owner.Database != runtime.Database {
		return fmt.Errorf("%s names database %q and %s database %q: they must name the same one", migrateVar, owner.Database, urlVar, runtime.Database)
	}
	return nil
}

// Migrate creates the service's database when it is missing and applies its migrations, both
// as the owner (MigrateURL), then grants the runtime role (URL's user) exactly what the service
// needs (database.Grant). When both URLs have the same user there is nobody to grant to: it
// warns instead.
func Migrate(ctx context.Context, d Database, service string, log zerolog.Logger) error {
	owner := d.migrateURL()
	if err := database.EnsureExists(ctx, owner); err != nil {
		return err
	}
	pool, err := database.Open(ctx, owner, database.ToolMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	setting := strings.ToUpper(service) + "_MIGRATE_DATABASE_URL"
	if err := database.Migrate(ctx, pool, service); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return fmt.Errorf("%w (migrations run as the owner: set %s, or %s_MIGRATE_ON_START=false and run migrate first)",
				err, setting, strings.ToUpper(service))
		}
		return err
	}
	runtime, err := database.IdentityOf(d.URL)
	if err != nil {
		return err
	}
	if runtime.User == pool.Config().ConnConfig.User {
		log.Warn().Str("role", runtime.User).
			Msgf("the service and its migrations use the same database role: nothing granted; set %s to the owner's URL to run the service as a role of its own (docs/database-roles.md)", setting)
		return nil
	}
	if err := database.Grant(ctx, pool, service, runtime.User); err != nil {
		return err
	}
	log.Info().Str("role", runtime.User).Msg("runtime role granted the service's privileges")
	return nil
}

// OpenDatabase migrates the service's database when d says so (Migrate) and returns a pool on
// it as the runtime role, warning when that role is a superuser or an owner, which no privilege
// holds back, and when the server runs without autovacuum.
func OpenDatabase(ctx context.Context, d Database, service string, log zerolog.Logger) (*pgxpool.Pool, error) {
	if d.MigrateOnStart {
		if err := Migrate(ctx, d, service, log); err != nil {
			return nil, err
		}
	}
	pool, err := database.Open(ctx, d.URL, database.ServiceMaxConns)
	if err != nil {
		return nil, err
	}
	p, err := database.CheckPrivileges(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", pool.Config().ConnConfig.Database, err)
	}
	switch {
	case p.Superuser:
		log.Warn().Str("role", p.User).Msg("the service runs as a database superuser: nothing in the database holds it back (docs/database-roles.md)")
	case p.Owner:
		log.Warn().Str("role", p.User).Msg("the service runs as an owner of its database: it could change the schema and rewrite the journal (docs/database-roles.md)")
	case p.CanCreate:
		log.Warn().Str("role", p.User).Msg("the service's database role may create objects in the schema (docs/database-roles.md)")
	}
	srv, err := database.CheckServer(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", pool.Config().ConnConfig.Database, err)
	}
	if !srv.Autovacuum {
		log.Warn().Bool("autovacuum", false).Msg("the database server runs with autovacuum off: the space of the outbox's and inbox's deleted rows is never reclaimed, and their tables grow on disk without bound (docs/database-roles.md)")
	}
	log.Info().Str("database", pool.Config().ConnConfig.Database).Str("role", p.User).Msg("database ready")
	return pool, nil
}

// Health is what the service needs to do its work: its database and the broker. The names are
// public (they appear in a failing /healthz); the errors are only logged.
func Health(pool *pgxpool.Pool, nc *nats.Conn) []web.Check {
	return []web.Check{
		{Name: "database", Func: pool.Ping},
		{Name: "nats", Func: func(context.Context) error { return events.Healthy(nc) }},
	}
}

// MaxHeaderBytes bounds a request's headers (net/http answers 431 beyond it).
const MaxHeaderBytes = 16 << 10

// MetricsWorker serves GET /metrics of m on addr, without API keys (bind it to an address
// only Prometheus reaches), for as long as the service runs.
func MetricsWorker(addr string, m *metrics.Metrics, log zerolog.Logger) Worker {
	return Worker{Name: "metrics server", Run: func(ctx context.Context) error {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		log.Info().Str("addr", ln.Addr().String()).Msg("metrics listening")
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shutdownCtx)
		}
	}}
}

// Worker is a background loop that runs until its context is cancelled.
type Worker struct {
	Name string
	Run  func(ctx context.Context) error
}

// Listen is where the HTTP API is served: an address, and optionally a TLS certificate and its
// key (PEM files; both or neither).
type Listen struct {
	Addr     string
	CertFile string
	KeyFile  string
	// AllowedHosts are the Host names the API answers (lower case, without port); empty: any.
	AllowedHosts []string
}

// ParseHosts reads a comma-separated list of Host names, lower-cased, blanks dropped.
func ParseHosts(raw string) []string {
	var hosts []string
	for _, h := range strings.Split(raw, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// Validate reports a TLS setting given without its other half, or files that do not load.
func (l Listen) Validate(certVar, keyVar string) error {
	switch {
	case l.CertFile == "" && l.KeyFile == "":
		return nil
	case l.CertFile == "" || l.KeyFile == "":
		return fmt.Errorf("%s and %s go together: give both or neither", certVar, keyVar)
	}
	if _, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile); err != nil {
		return fmt.Errorf("%s / %s: %w", certVar, keyVar, err)
	}
	return nil
}

// Run serves handler where l says (HTTPS when it names a certificate, every answer then carrying
// Strict-Transport-Security; only l.AllowedHosts when it names some: web.Front) and runs the workers
// until ctx is cancelled (SIGINT/SIGTERM). Shutdown stops taking requests first and lets those
// in flight finish, then stops the workers, which finish or release their in-flight work.
func Run(ctx context.Context, l Listen, handler http.Handler, workers []Worker, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", l.Addr, err)
	}
	srv := &http.Server{
		Handler: web.Front(handler, l.CertFile != "", l.AllowedHosts),
		// A client that trickles its headers or body, or never reads the answer, does not hold a
		// connection for ever; no request of either API needs more than these.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    MaxHeaderBytes,
		BaseContext: func(net.Listener) context.Context {
			return log.WithContext(context.WithoutCancel(ctx))
		},
	}
	serve := func() error { return srv.Serve(ln) }
	if l.CertFile != "" {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		serve = func() error { return srv.ServeTLS(ln, l.CertFile, l.KeyFile) }
	}
	log.Info().Str("addr", ln.Addr().String()).Bool("tls", l.CertFile != "").Msg("http listening")

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	g, gctx := errgroup.WithContext(workCtx)
	for _, w := range workers {
		g.Go(func() error {
			if err := w.Run(gctx); err != nil {
				return fmt.Errorf("%s: %w", w.Name, err)
			}
			return nil
		})
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve() }()

	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down: no new requests")
	case err := <-serveErr:
		stopWork()
		_ = g.Wait()
		return fmt.Errorf("http server: %w", err)
	case <-gctx.Done():
		log.Error().Msg("a worker stopped; shutting down")
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	shutdownErr := srv.Shutdown(shutdownCtx)
	stopWork()
	workErr := g.Wait()
	log.Info().Msg("stopped")
	if shutdownErr != nil {
		return fmt.Errorf("http shutdown: %w", shutdownErr)
	}
	return workErr
}
