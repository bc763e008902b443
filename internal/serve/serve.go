// Package serve is what the two service processes share around their own parts: opening the
// database (created and migrated when needed) and the NATS connection, running the HTTP server
// and the background workers, and shutting down in order on a signal.
package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
)

// OpenDatabase creates the service's database when it is missing, applies its migrations and
// returns a pool on it.
func OpenDatabase(ctx context.Context, url, service string, log zerolog.Logger) (*pgxpool.Pool, error) {
	if err := database.EnsureExists(ctx, url); err != nil {
		return nil, err
	}
	pool, err := database.Open(ctx, url, database.ServiceMaxConns)
	if err != nil {
		return nil, err
	}
	if err := database.Migrate(ctx, pool, service); err != nil {
		pool.Close()
		return nil, err
	}
	log.Info().Str("database", pool.Config().ConnConfig.Database).Msg("database ready")
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

// Run serves handler where l says (HTTPS when it names a certificate) and runs the workers
// until ctx is cancelled (SIGINT/SIGTERM). Shutdown stops taking requests first and lets those
// in flight finish, then stops the workers, which finish or release their in-flight work.
func Run(ctx context.Context, l Listen, handler http.Handler, workers []Worker, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", l.Addr, err)
	}
	srv := &http.Server{
		Handler: handler,
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
