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

	"walletgl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wallet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, "wallet", commands(), args, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

func commands() []cli.Command {
	return []cli.Command{
		{Words: []string{"serve"}, Help: "run the HTTP API, the outbox relay and the acknowledgment consumer", Run: serveCmd},
		{Words: []string{"migrate"}, Help: "create the database if missing and apply its migrations", Run: migrateCmd},
		{Words: []string{"outbox", "stats"}, Help: "outbox rows per status, oldest pending and unacknowledged age", Run: outboxStatsCmd},
		{Words: []string{"outbox", "list"}, Help: "outbox rows of one status: --status S [--limit N]", Run: outboxListCmd},
		{Words: []string{"outbox", "show"}, Help: "one outbox row with its payload: ID", Run: outboxShowCmd},
		{Words: []string{"outbox", "requeue"}, Help: "failed/dead_letter rows back to pending: ID... | --status S", Run: outboxRequeueCmd},
		{Words: []string{"outbox", "reconcile"}, Help: "acknowledge stuck rows the GL already posted [--dry-run]", Run: outboxReconcileCmd},
		{Words: []string{"outbox", "republish"}, Help: "acknowledged rows created in a period back to pending, published again: --since T [--until T] (RFC 3339)", Run: outboxRepublishCmd},
		{Words: []string{"verify"}, Help: "check the wallet's invariants; non-zero exit when one fails", Run: verifyCmd},
	}
}
