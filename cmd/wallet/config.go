package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/events"
	"walletgl/internal/serve"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// service is the wallet as its commands see it: its settings, the handler of its inbox (the
// GL's acknowledgments) and its invariants.
var service = cli.Service[*Config]{
	Name: "wallet", Consumer: events.ConsumerWallet, Scopes: auth.WalletScopes,
	SettingsFunc: func() *Config { return new(Config) },
	InboxHandlerFunc: func(context.Context, *Config, *pgxpool.Pool, zerolog.Logger) (events.Handler, error) {
		return postgres.NewAcknowledgments(), nil
	},
	VerifyFunc: verifyChecks,
	EventsFunc: func(c *Config) config.Events { return c.Events },
}

// Config is every setting of the wallet service.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	TLSCert     string // PEM certificate of the HTTP API (with TLSKey: HTTPS)
	TLSKey      string
	GLURL       string // the GL's HTTP API, asked by wallet outbox reconcile
	GLAPIKey    string // its API key (ledger:read)
	RateLimit   string // each API key's allowance, RATE[:BURST] requests per second
	MetricsAddr string // where GET /metrics is served without API keys ("": on the API, with metrics:read)
	// Group commit of transfers: the most requests per transaction, and how many such
	// transactions may be committing at once (0: a transaction per request, no batching).
	BatchMax     int
	BatchWorkers int
	Events       config.Events
	Log          config.Log

	// The owner's URL for migrations (empty: DatabaseURL), which grant DatabaseURL's user what
	// the service needs; and whether serve migrates at start.
	MigrateDatabaseURL string
	MigrateOnStart     bool
}

// Bind binds every setting to c: the environment variable, and the flag that overrides it.
func (c *Config) Bind(s *config.Set) {
	s.String(&c.DatabaseURL, "WALLET_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/wallet?sslmode=disable", "the wallet's PostgreSQL database (serve and migrate create it when missing)")
	s.String(&c.MigrateDatabaseURL, "WALLET_MIGRATE_DATABASE_URL", "migrate-database-url", "", "the wallet's database as its owner, for migrations (migrate, and serve at start), which then grant the user of WALLET_DATABASE_URL what the service needs (empty: WALLET_DATABASE_URL, nothing granted)")
	s.Bool(&c.MigrateOnStart, "WALLET_MIGRATE_ON_START", "migrate-on-start", true, "serve creates and migrates the database before it serves (false: run migrate first, and serve needs no owner's URL)")
	s.String(&c.HTTPAddr, "WALLET_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "address of the wallet's HTTP API")
	s.String(&c.TLSCert, "WALLET_TLS_CERT", "tls-cert", "", "PEM certificate file: with WALLET_TLS_KEY the API is served over HTTPS (empty: HTTP)")
	s.String(&c.TLSKey, "WALLET_TLS_KEY", "tls-key", "", "PEM private key file of WALLET_TLS_CERT")
	s.String(&c.GLURL, "GL_URL", "gl-url", "http://127.0.0.1:8081", "the GL's HTTP API, which wallet outbox reconcile asks what it posted")
	s.Secret(&c.GLAPIKey, "GL_API_KEY", "an API key of the GL with ledger:read, sent by wallet outbox reconcile")
	s.String(&c.MetricsAddr, "WALLET_METRICS_ADDR", "metrics-addr", "", "address serving GET /metrics without API keys, for Prometheus (empty: /metrics on the API address, with a key holding metrics:read)")
	s.String(&c.RateLimit, "WALLET_RATE_LIMIT", "rate-limit", auth.DefaultRateLimit.String(), "each API key's allowance: requests per second[:burst]; over it, 429 with Retry-After")
	s.Int(&c.BatchMax, "WALLET_BATCH_MAX", "batch-max", postgres.DefaultBatchMaxSize, "most transfer requests committed in one transaction")
	s.Int(&c.BatchWorkers, "WALLET_BATCH_WORKERS", "batch-workers", postgres.DefaultBatchWorkers, "transfer batches committing at once; 0 gives each request a transaction of its own")
	config.BindEvents(s, &c.Events)
	config.BindLog(s, &c.Log)
}

// Postgres is the service's database: its URL, the owner's for migrations, whether serve migrates.
func (c *Config) Postgres() serve.Database {
	return serve.Database{URL: c.DatabaseURL, MigrateURL: c.MigrateDatabaseURL, MigrateOnStart: c.MigrateOnStart}
}

// Listen is where the HTTP API is served.
func (c *Config) Listen() serve.Listen {
	return serve.Listen{Addr: c.HTTPAddr, CertFile: c.TLSCert, KeyFile: c.TLSKey}
}

// Database and Logging are what the commands both binaries share read of the settings.
func (c *Config) Database() string    { return c.DatabaseURL }
func (c *Config) Logging() config.Log { return c.Log }

// Validate reports every setting out of range.
func (c *Config) Validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("WALLET_DATABASE_URL is empty"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("WALLET_HTTP_ADDR is empty"))
	}
	if c.BatchMax < 1 {
		errs = append(errs, fmt.Errorf("WALLET_BATCH_MAX must be at least 1, got %d", c.BatchMax))
	}
	if _, err := auth.ParseRateLimit(c.RateLimit); err != nil {
		errs = append(errs, fmt.Errorf("WALLET_RATE_LIMIT: %w", err))
	}
	if err := c.Listen().Validate("WALLET_TLS_CERT", "WALLET_TLS_KEY"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Postgres().Validate("WALLET_DATABASE_URL", "WALLET_MIGRATE_DATABASE_URL"); err != nil {
		errs = append(errs, err)
	}
	if c.BatchWorkers < 0 {
		errs = append(errs, fmt.Errorf("WALLET_BATCH_WORKERS must be 0 or more, got %d", c.BatchWorkers))
	}
	return errors.Join(append(errs, c.Events.Validate())...)
}

// verifyChecks runs the wallet's invariant checks (wallet verify).
func verifyChecks(ctx context.Context, cfg *Config, pool *pgxpool.Pool) ([]cli.Check, error) {
	checks, err := postgres.Verify(ctx, pool, wallet.VerifyOptions{Retention: cfg.Events.Retention})
	if err != nil {
		return nil, err
	}
	out := make([]cli.Check, 0, len(checks))
	for _, c := range checks {
		out = append(out, cli.NewCheck(c.Name, c.Unit, c.Checked, c.Failed, c.Sample))
	}
	return out, nil
}
