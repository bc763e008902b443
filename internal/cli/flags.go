package cli

import (
	"fmt"

	"walletgl/internal/config"
	"walletgl/internal/logging"
)

// Settings is a service's configuration (its Config): Bind ties every setting to its
// environment variable and flag, Validate checks them once parsed.
type Settings interface {
	Bind(s *config.Set)
	Validate() error
	Database() string        // the service's database URL
	OwnerDatabase() string   // the database as its owner, the migrate URL ("": not set)
	Logging() logging.Config // the log settings
}

// Parse reads a command's line into settings, which come from the environment and may be
// overridden by their flags, and into the command's own flags, which own adds to the set (nil
// when there are none; they may be settings with a variable of their own too). Flags may stand
// anywhere among the positional arguments, which it returns. Asked for help (-h, --help), it
// prints the command's line in the table, its flags and the settings, and returns flag.ErrHelp,
// which Run turns into success.
func Parse(env Env, settings Settings, own func(s *config.Set), args []string) ([]string, error) {
	set := config.NewSet(env.Name, env.Getenv, env.Stderr)
	if own != nil {
		own(set)
	}
	settings.Bind(set)
	fs := set.Flags()
	usage := fs.Usage
	fs.Usage = func() {
		if env.Help != "" {
			fmt.Fprintf(env.Stderr, "%s: %s\n", env.Name, env.Help)
		}
		usage()
	}
	if err := set.Parse(args); err != nil {
		return nil, err
	}
	if err := settings.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return set.Args(), nil
}

// JSONFlag adds --json, which every command that prints has: JSON for scripts instead of the
// text for people.
func JSONFlag(s *config.Set, p *bool) {
	s.Flags().BoolVar(p, "json", false, "print JSON for scripts instead of the text for people")
}
