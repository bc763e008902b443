// Command wallet runs the wallet service: an HTTP API for wallets and transfers whose every
// transfer writes a TransferCompleted.v1 event to the outbox in the same transaction, the relay
// that publishes the outbox to JetStream, and the consumer of the GL's acknowledgments.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wallet:", err)
		os.Exit(1)
	}
}

// command is one subcommand: its words (e.g. "outbox stats") and the function running it.
type command struct {
	words []string
	help  string
	run   func(ctx context.Context, env environment, args []string) error
}

// environment is what a subcommand may touch of the outside world.
type environment struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

func commands() []command {
	return []command{
		{[]string{"serve"}, "run the HTTP API, the outbox relay and the acknowledgment consumer", serve},
		{[]string{"migrate"}, "create the database if missing and apply its migrations", migrate},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	env := environment{getenv: getenv, stdout: stdout, stderr: stderr}
	for _, cmd := range commands() {
		if matches(args, cmd.words) {
			return cmd.run(ctx, env, args[len(cmd.words):])
		}
	}
	usage(stderr)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		return nil
	}
	return fmt.Errorf("unknown command %q", args)
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

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: wallet <command> [flags]  (wallet <command> -h lists the flags)")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-24s %s\n", joinWords(cmd.words), cmd.help)
	}
}

func joinWords(words []string) string {
	s := ""
	for i, w := range words {
		if i > 0 {
			s += " "
		}
		s += w
	}
	return s
}
