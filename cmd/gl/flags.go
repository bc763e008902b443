package main

import (
	"github.com/rs/zerolog"

	"walletgl/internal/cli"
	"walletgl/internal/config"
)

// warnLevel keeps the one-shot commands' logs to what needs attention: their output is the report.
const warnLevel = zerolog.WarnLevel

// flagSet is the configuration of a one-shot command plus its own flags.
type flagSet struct {
	set  *config.Set
	json bool
}

func (s *flagSet) jsonFlag() {
	s.set.Flags().BoolVar(&s.json, "json", false, "print JSON for scripts instead of the readable report")
}

// loadConfigWith binds the service configuration and the command's own flags (added by extra),
// without parsing yet: a command may take positional arguments first.
func loadConfigWith(name string, env cli.Env, extra func(s *flagSet)) (*Config, *flagSet) {
	cfg, set := bindConfig(name, env)
	s := &flagSet{set: set}
	extra(s)
	return cfg, s
}

// parse reads args into the flags and checks the configuration.
func (s *flagSet) parse(args []string, cfg *Config) error {
	if err := s.set.Parse(args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	return nil
}
