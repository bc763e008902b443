// Package cli is the subcommand table both binaries use: `wallet serve`, `gl inbox stats`, ...
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Env is what a command may touch of the outside world, so tests can run commands in parallel.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
}

// Command is one subcommand: its words and the function that runs it with the remaining args.
type Command struct {
	Words []string
	Help  string
	Run   func(ctx context.Context, env Env, args []string) error
}

// Run runs the command of table that args name; with no or unknown args it prints the usage.
func Run(ctx context.Context, program string, table []Command, args []string, env Env) error {
	var best *Command
	for i, cmd := range table {
		if matches(args, cmd.Words) && (best == nil || len(cmd.Words) > len(best.Words)) {
			best = &table[i]
		}
	}
	if best != nil {
		return best.Run(ctx, env, args[len(best.Words):])
	}
	fmt.Fprintf(env.Stderr, "Usage: %s <command> [flags]  (%s <command> -h lists the flags)\n", program, program)
	for _, cmd := range table {
		fmt.Fprintf(env.Stderr, "  %-26s %s\n", strings.Join(cmd.Words, " "), cmd.Help)
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		return nil
	}
	return fmt.Errorf("unknown command %q", strings.Join(args, " "))
}

func matches(args, words []string) bool {
	if len(args) < len(words) {
		return false
	}
	for i, w := range words {
		if args[i] != w {
			return false
		}
	}
	return true
}
