// Command wallet runs the wallet service: an HTTP API for wallets and transfers whose every
// transfer writes a TransferCompleted.v2 event (v1 for a deposit with WALLET_TRANSFER_EVENT_VERSION=1) to the outbox in the same transaction, the relay
// that publishes the outbox to JetStream, and the consumer of the GL's acknowledgments.
package main

import (
	"context"
	"io"

	"walletgl/internal/cli"
)

func main() { cli.Main("wallet", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, "wallet", commands(), args, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "serve", Help: "run the HTTP API, the outbox relay and the acknowledgment consumer", RunFunc: serveCmd},
		{Name: "migrate", Help: "create the database if missing and apply its migrations", RunFunc: migrateCmd},
		service.Outbox(
			cli.Command{Name: "reconcile", Help: "acknowledge stuck rows the GL already posted [--dry-run] [--json]", RunFunc: outboxReconcileCmd},
			cli.Command{Name: "republish", Help: "acknowledged rows created in a period back to pending, published again: --since T [--until T] (RFC 3339) [--json]", RunFunc: outboxRepublishCmd},
			cli.Command{Name: "rebuild", Help: "the events of the movements made in a period, re-created from the wallet's tables, published again: --since T [--until T] (RFC 3339) [--batch N] [--json]", RunFunc: outboxRebuildCmd},
		),
		service.Inbox(),
		service.Keys(),
		service.Events(),
		service.Audit(),
		{Name: "verify", Help: "check the wallet's invariants; exit 1 when one fails [--json]", RunFunc: service.Verify},
		{Name: "status", Help: cli.StatusHelp, RunFunc: service.Status},
	}
}
