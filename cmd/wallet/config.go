package main

import (
	"errors"
	"fmt"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/wallet/postgres"
)

// Config is every setting of the wallet service.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	GLURL       string // the GL's HTTP API, asked by wallet outbox reconcile
	// Group commit of transfers: the most requests per transaction, and how many such
	// transactions may be committing at once (0: a transaction per request, no batching).
	BatchMax     int
	BatchWorkers int
	Events       config.Events
	Log          config.Log
}

// loadConfig reads the settings from the environment and args (flags override variables) and
// validates them.
func loadConfig(name string, args []string, env cli.Env) (Config, *config.Set, error) {
	var c Config
	s := config.NewSet(name, env.Getenv, env.Stderr)
	s.String(&c.DatabaseURL, "WALLET_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/wallet?sslmode=disable", "the wallet's PostgreSQL database (created when missing)")
	s.String(&c.HTTPAddr, "WALLET_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "address of the wallet's HTTP API")
	s.String(&c.GLURL, "GL_URL", "gl-url", "http://127.0.0.1:8081", "the GL's HTTP API, which wallet outbox reconcile asks what it posted")
	s.Int(&c.BatchMax, "WALLET_BATCH_MAX", "batch-max", postgres.DefaultBatchMaxSize, "most transfer requests committed in one transaction")
	s.Int(&c.BatchWorkers, "WALLET_BATCH_WORKERS", "batch-workers", postgres.DefaultBatchWorkers, "transfer batches committing at once; 0 gives each request a transaction of its own")
	config.BindEvents(s, &c.Events)
	config.BindLog(s, &c.Log)
	return c, s, s.Parse(args)
}

func (c Config) validate() error {
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
	if c.BatchWorkers < 0 {
		errs = append(errs, fmt.Errorf("WALLET_BATCH_WORKERS must be 0 or more, got %d", c.BatchWorkers))
	}
	return errors.Join(append(errs, c.Events.Validate())...)
}
