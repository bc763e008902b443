package main

import (
	"errors"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/gl"
)

// Config is every setting of the GL service.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	Rule        gl.PostingRule
	Events      config.Events
	Log         config.Log
}

// loadConfig reads the settings from the environment and args (flags override variables).
func loadConfig(name string, args []string, env cli.Env) (Config, *config.Set, error) {
	c, s := bindConfig(name, env)
	err := s.Parse(args)
	return *c, s, err
}

// bindConfig binds every setting to the returned Config; parsing the set fills it in.
func bindConfig(name string, env cli.Env) (*Config, *config.Set) {
	c := &Config{}
	s := config.NewSet(name, env.Getenv, env.Stderr)
	s.String(&c.DatabaseURL, "GL_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5432/gl?sslmode=disable", "the GL's PostgreSQL database (created when missing)")
	s.String(&c.HTTPAddr, "GL_HTTP_ADDR", "http-addr", "127.0.0.1:8081", "address of the GL's HTTP API")
	s.String(&c.Rule.DebitAccount, "GL_TRANSFER_DEBIT_ACCOUNT", "transfer-debit-account", gl.DefaultPostingRule.DebitAccount, "account debited for each TransferCompleted.v1")
	s.String(&c.Rule.CreditAccount, "GL_TRANSFER_CREDIT_ACCOUNT", "transfer-credit-account", gl.DefaultPostingRule.CreditAccount, "account credited for each TransferCompleted.v1")
	config.BindEvents(s, &c.Events)
	config.BindLog(s, &c.Log)
	return c, s
}

func (c Config) validate() error {
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
	return errors.Join(append(errs, c.Events.Validate())...)
}
