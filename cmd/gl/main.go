// Command gl runs the general-ledger service: a durable JetStream consumer that posts every
// TransferCompleted.v1 exactly once as a balanced journal entry and acknowledges it back to the
// wallet, and an HTTP API to query the postings.
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
		fmt.Fprintln(os.Stderr, "gl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, "gl", commands(), args, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

func commands() []cli.Command {
	return []cli.Command{
		{Words: []string{"serve"}, Help: "run the event consumer, the acknowledgment relay and the HTTP API", Run: serveCmd},
		{Words: []string{"migrate"}, Help: "create the database if missing and apply its migrations", Run: migrateCmd},
		{Words: []string{"accounts", "list"}, Help: "list the chart of accounts [--json]", Run: accountsListCmd},
		{Words: []string{"accounts", "add"}, Help: "add an account: CODE --name N --type asset|liability|equity|revenue|expense [--json]", Run: accountsAddCmd},
		{Words: []string{"replay"}, Help: replayHelp, Run: replayCmd},
		{Words: []string{"reconcile"}, Help: "compare every wallet transfer with the GL's entries; exit 1 on any difference [--json]", Run: reconcileCmd},
		{Words: []string{"verify"}, Help: "check the ledger's invariants on the live database; exit 1 when one fails [--json]", Run: verifyCmd},
		{Words: []string{"inbox"}, Help: "the inbox's operator tools: stats, list, retry (gl inbox lists them)", Run: inboxCmd},
	}
}
