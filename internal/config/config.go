// Package config reads settings: each one from an environment variable, which a command-line
// flag of the same meaning may override, with its default and description kept in one place so
// the settings table (docs/configuration.md) and -help agree. It knows no component: each
// component declares its own settings on a Set (a Bind method beside the code they configure)
// and checks them (Validate).
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Set binds settings to variables. Environment values become the flags' defaults, so a flag
// given on the command line wins.
type Set struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
	docs   []Doc
	args   []string // the positional arguments, after Parse
}

// Doc describes one setting for -help and docs/configuration.md.
type Doc struct {
	Env, Flag, Default, Usage string
}

// NewSet returns a set for the command name, reading the environment through getenv.
func NewSet(name string, getenv func(string) string, output io.Writer) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(output)
	s := &Set{fs: fs, getenv: getenv}
	fs.Usage = func() {
		// A command's own flags (added through Flags) have no variable and say what the command
		// does: they come first.
		withEnv := map[string]bool{}
		for _, d := range s.docs {
			withEnv[d.Flag] = true
		}
		header := false
		fs.VisitAll(func(f *flag.Flag) {
			if withEnv[f.Name] {
				return
			}
			if !header {
				fmt.Fprintf(output, "Flags of %s:\n", name)
				header = true
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(output, "  -%s%s\n    \t%s\n", f.Name, def, f.Usage)
		})
		fmt.Fprintf(output, "Settings of %s (each flag also reads the environment variable named):\n", name)
		for _, d := range s.docs {
			if d.Flag == "" { // a secret: its variable alone, never a value
				fmt.Fprintf(output, "  %s\n    \t%s\n", d.Env, d.Usage)
				continue
			}
			fmt.Fprintf(output, "  -%s (%s, default %q)\n    \t%s\n", d.Flag, d.Env, d.Default, d.Usage)
		}
	}
	return s
}

// Flags exposes the flag set for flags that have no environment variable (such as --json).
func (s *Set) Flags() *flag.FlagSet { return s.fs }

func (s *Set) lookup(env, flagName, def, usage string) string {
	s.docs = append(s.docs, Doc{Env: env, Flag: flagName, Default: def, Usage: usage})
	if v := s.getenv(env); v != "" {
		return v
	}
	return def
}

// String binds a string setting.
func (s *Set) String(p *string, env, flagName, def, usage string) {
	s.fs.StringVar(p, flagName, s.lookup(env, flagName, def, usage), usage)
}

// Secret binds a secret setting from the environment alone: a flag would show it in the
// process list, and help never shows its value.
func (s *Set) Secret(p *string, env, usage string) {
	s.docs = append(s.docs, Doc{Env: env, Usage: usage + " (environment only)"})
	*p = s.getenv(env)
}

// Env binds a setting from the environment alone: a standard variable that other programs read
// too (OTEL_*), which keeps its one name and has no flag.
func (s *Set) Env(p *string, env, usage string) {
	s.docs = append(s.docs, Doc{Env: env, Usage: usage + " (environment only)"})
	*p = s.getenv(env)
}

// Int binds an integer setting.
func (s *Set) Int(p *int, env, flagName string, def int, usage string) {
	raw := s.lookup(env, flagName, strconv.Itoa(def), usage)
	v, err := strconv.Atoi(raw)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %q is not a whole number", env, raw))
		v = def
	}
	s.fs.IntVar(p, flagName, v, usage)
}

// Int64 binds a large integer setting, such as a size in bytes.
func (s *Set) Int64(p *int64, env, flagName string, def int64, usage string) {
	raw := s.lookup(env, flagName, strconv.FormatInt(def, 10), usage)
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %q is not a whole number", env, raw))
		v = def
	}
	s.fs.Int64Var(p, flagName, v, usage)
}

// Bool binds a true/false setting (true, false, 1, 0, …: strconv.ParseBool).
func (s *Set) Bool(p *bool, env, flagName string, def bool, usage string) {
	raw := s.lookup(env, flagName, strconv.FormatBool(def), usage)
	v, err := strconv.ParseBool(raw)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %q is not true or false", env, raw))
		v = def
	}
	s.fs.BoolVar(p, flagName, v, usage)
}

// OptIn binds a setting that is off unless set to exactly "true" (in the environment, or as
// -flag, -flag=true): for the settings that lower the service's guard, where a typo ("1",
// "yes", "TRUE") must stop the start rather than be read one way or the other. "false" and
// empty are off; any other value is an error naming the setting.
func (s *Set) OptIn(p *bool, env, flagName, usage string) {
	raw := s.lookup(env, flagName, "false", usage+` (exactly "true" or "false")`)
	v, err := parseOptIn(raw)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", env, err))
	}
	*p = v
	s.fs.Var(optIn{p: p}, flagName, usage)
}

func parseOptIn(raw string) (bool, error) {
	switch raw {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither true nor false (exactly, lower case)", raw)
}

// optIn is OptIn's flag: -flag alone is true, -flag=VALUE takes "true" or "false" only.
type optIn struct{ p *bool }

func (o optIn) String() string {
	if o.p == nil {
		return "false"
	}
	return strconv.FormatBool(*o.p)
}

func (o optIn) Set(raw string) error {
	v, err := parseOptIn(raw)
	if err != nil {
		return err
	}
	*o.p = v
	return nil
}

func (o optIn) IsBoolFlag() bool { return true }

// Duration binds a duration setting (Go syntax: 500ms, 5s, 168h).
func (s *Set) Duration(p *time.Duration, env, flagName string, def time.Duration, usage string) {
	raw := s.lookup(env, flagName, def.String(), usage)
	v, err := time.ParseDuration(raw)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %q is not a duration (like 5s or 250ms)", env, raw))
		v = def
	}
	s.fs.DurationVar(p, flagName, v, usage)
}

// Parse reads the command line; it reports every malformed environment value at once. Flags
// may come before, between and after the positional arguments (gl accounts add 4010 --name N,
// wallet outbox requeue ID --json); after "--" every argument is positional.
func (s *Set) Parse(args []string) error {
	if err := errors.Join(s.errs...); err != nil {
		return err
	}
	s.args = nil
	for {
		if err := s.fs.Parse(args); err != nil {
			return err
		}
		rest := s.fs.Args()
		if len(rest) == 0 {
			return nil
		}
		// The flag package stops at the first positional argument, or just after "--".
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			s.args = append(s.args, rest...)
			return nil
		}
		s.args = append(s.args, rest[0])
		args = rest[1:]
	}
}

// Args are the positional arguments, in order.
func (s *Set) Args() []string { return s.args }
