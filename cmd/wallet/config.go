package main

import (
	"errors"

	"walletgl/internal/cli"
	"walletgl/internal/config"
)

// Config is every setting of the wallet service.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	GLURL       string // the GL's HTTP API, asked by wallet outbox reconcile
	Events      config.Events
	Log         config.Log
}

// loadConfig reads the settings from the environment and args (flags override variables) and
// validates them.
func loadConfig(name string, args []string, env cli.Env) (Config, *config.Set, error) {
	var c Config
	s := config.NewSet(name, env.Getenv, env.Stderr)
	s.String(&c.DatabaseURL, "WALLET_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/wallet?sslmode=disable", "the wallet's PostgreSQL database (created when missing)")
	s.String(&c.HTTPAddr, "WALLET_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "address of the wallet's HTTP API")
	s.String(&c.GLURL, "GL_URL", "gl-url", "http://127.0.0.1:8081", "the GL's HTTP API, which wallet outbox reconcile asks what it posted")
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
	return errors.Join(append(errs, c.Events.Validate())...)
}
