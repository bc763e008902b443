// Package cli is the command line both binaries share: the command table with its groups
// (`wallet outbox stats`), one way to read a command's settings and flags (Parse) and to open its
// database (OpenDatabase), the outputs for people and for scripts, the report of verify (Check),
// and the outbox and inbox commands built once from admin.Admin (Service).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Env is what a command may touch of the outside world, so tests can run commands in parallel,
// and what Run tells it about itself.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer

	Name string // the command as typed, program first: "wallet outbox list" (set by Run)
	Help string // its line in the table (set by Run)
}

// RunFunc runs a command with the arguments after its name.
type RunFunc func(ctx context.Context, env Env, args []string) error

// Command is one row of a command table: a command (RunFunc), or a group of commands (Sub) such
// as `outbox stats|list|…`.
type Command struct {
	Name    string
	Help    string
	RunFunc RunFunc
	Sub     []Command
}

// MainFunc is a binary's run: its whole outside world is in the arguments.
type MainFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run as the process: stopped by SIGINT or SIGTERM, with the process's arguments,
// environment and streams. An error is printed as "program: error" and exits 1.
func Main(program string, run MainFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		os.Exit(1)
	}
}

// Run runs the command of table that args name, descending into groups. Without a command, or
// asked for help (help, -h, --help), it prints the table and succeeds; a command asked for help
// prints its flags and succeeds too.
func Run(ctx context.Context, program string, table []Command, args []string, env Env) error {
	if len(args) > 0 {
		for _, cmd := range table {
			if cmd.Name != args[0] {
				continue
			}
			name := program + " " + cmd.Name
			if cmd.Sub != nil {
				return Run(ctx, name, cmd.Sub, args[1:], env)
			}
			env.Name, env.Help = name, cmd.Help
			if err := cmd.RunFunc(ctx, env, args[1:]); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
	}
	fmt.Fprintf(env.Stderr, "Usage: %s <command> [flags]  (%s <command> -h lists the flags)\n", program, program)
	writeTable(env.Stderr, "", table)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		return nil
	}
	words := append(strings.Fields(program)[1:], args...)
	return fmt.Errorf("unknown command %q", strings.Join(words, " "))
}

// writeTable lists every command of table, those of its groups under the group's name.
func writeTable(w io.Writer, prefix string, table []Command) {
	for _, cmd := range table {
		if cmd.Sub != nil {
			writeTable(w, prefix+cmd.Name+" ", cmd.Sub)
			continue
		}
		fmt.Fprintf(w, "  %-26s %s\n", prefix+cmd.Name, cmd.Help)
	}
}
