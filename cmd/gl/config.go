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
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/serve"
)

// service is the GL as its commands see it: its settings, the handler of its inbox (the
// posting of transfers) and its invariants.
var service = cli.Service[*Config]{
	Name: "gl", Consumer: events.ConsumerGL, Scopes: auth.GLScopes,
	SettingsFunc:     func() *Config { return new(Config) },
	InboxHandlerFunc: transferPoster,
	VerifyFunc:       verifyChecks,
	EventsFunc:       func(c *Config) config.Events { return c.Events },
}

// Config is every setting of the GL service.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	TLSCert     string // PEM certificate of the HTTP API (with TLSKey: HTTPS)
	TLSKey      string
	RateLimit   string // each API key's allowance, RATE[:BURST] requests per second
	MetricsAddr string // where GET /metrics is served without API keys ("": on the API, with metrics:read)
	Rule        gl.PostingRule
	Events      config.Events
	Log         config.Log

	// The owner's URL for migrations (empty: DatabaseURL), which grant DatabaseURL's user what
	// the service needs; and whether serve migrates at start.
	MigrateDatabaseURL string
	MigrateOnStart     bool
}

// Bind binds every setting to c: the environment variable, and the flag that overrides it.
func (c *Config) Bind(s *config.Set) {
	s.String(&c.DatabaseURL, "GL_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/gl?sslmode=disable", "the GL's PostgreSQL database (serve and migrate create it when missing)")
	s.String(&c.MigrateDatabaseURL, "GL_MIGRATE_DATABASE_URL", "migrate-database-url", "", "the GL's database as its owner, for migrations (migrate, and serve at start), which then grant the user of GL_DATABASE_URL what the service needs (empty: GL_DATABASE_URL, nothing granted)")
	s.Bool(&c.MigrateOnStart, "GL_MIGRATE_ON_START", "migrate-on-start", true, "serve creates and migrates the database before it serves (false: run migrate first, and serve needs no owner's URL)")
	s.String(&c.HTTPAddr, "GL_HTTP_ADDR", "http-addr", "127.0.0.1:8081", "address of the GL's HTTP API")
	s.String(&c.TLSCert, "GL_TLS_CERT", "tls-cert", "", "PEM certificate file: with GL_TLS_KEY the API is served over HTTPS (empty: HTTP)")
	s.String(&c.TLSKey, "GL_TLS_KEY", "tls-key", "", "PEM private key file of GL_TLS_CERT")
	s.String(&c.MetricsAddr, "GL_METRICS_ADDR", "metrics-addr", "", "address serving GET /metrics without API keys, for Prometheus (empty: /metrics on the API address, with a key holding metrics:read)")
	s.String(&c.RateLimit, "GL_RATE_LIMIT", "rate-limit", auth.DefaultRateLimit.String(), "each API key's allowance: requests per second[:burst]; over it, 429 with Retry-After")
	s.String(&c.Rule.DebitAccount, "GL_TRANSFER_DEBIT_ACCOUNT", "transfer-debit-account", gl.DefaultPostingRule.DebitAccount, "account debited for each TransferCompleted.v1")
	s.String(&c.Rule.CreditAccount, "GL_TRANSFER_CREDIT_ACCOUNT", "transfer-credit-account", gl.DefaultPostingRule.CreditAccount, "account credited for each TransferCompleted.v1")
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
		errs = append(errs, errors.New("GL_DATABASE_URL is empty"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("GL_HTTP_ADDR is empty"))
	}
	if c.Rule.DebitAccount == "" || c.Rule.CreditAccount == "" {
		errs = append(errs, errors.New("GL_TRANSFER_DEBIT_ACCOUNT and GL_TRANSFER_CREDIT_ACCOUNT must be set"))
	}
	if _, err := auth.ParseRateLimit(c.RateLimit); err != nil {
		errs = append(errs, fmt.Errorf("GL_RATE_LIMIT: %w", err))
	}
	if err := c.Listen().Validate("GL_TLS_CERT", "GL_TLS_KEY"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Postgres().Validate("GL_DATABASE_URL", "GL_MIGRATE_DATABASE_URL"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, c.Events.Validate())...)
}

// transferPoster is the handler gl inbox retry posts failed events with, as serve's consumer
// does: the configured posting rule over the ledger.
func transferPoster(ctx context.Context, cfg *Config, pool *pgxpool.Pool, log zerolog.Logger) (events.Handler, error) {
	ledger := postgres.NewLedger(pool)
	if err := cfg.Rule.Check(ctx, ledger); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return gl.NewTransferPoster(cfg.Rule, ledger, log), nil
}

// verifyChecks runs the ledger's invariant checks (gl verify). They only read: the database is
// neither created nor migrated, so a wrong URL fails instead of creating one.
func verifyChecks(ctx context.Context, _ *Config, pool *pgxpool.Pool) ([]cli.Check, error) {
	checks, err := postgres.NewLedger(pool).Verify(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cli.Check, 0, len(checks))
	for _, c := range checks {
		out = append(out, cli.NewCheck(c.Name, "", c.Checked, c.Failures, c.Offenders))
	}
	return out, nil
}
