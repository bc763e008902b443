// Command gl runs the general-ledger service: a durable JetStream consumer that posts every
// TransferCompleted (v1 or v2) exactly once, by the posting rule of its kind, as a balanced journal entry and acknowledges it back to the
// wallet, and an HTTP API to query the postings.
package main

import (
	"context"
	"io"

	"walletgl/internal/cli"
)

func main() { cli.Main("gl", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, "gl", commands(), args, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "serve", Help: "run the event consumer, the acknowledgment relay and the HTTP API", RunFunc: serveCmd},
		{Name: "migrate", Help: "create the database if missing and apply its migrations", RunFunc: migrateCmd},
		{Name: "accounts", Sub: []cli.Command{
			{Name: "list", Help: "list the chart of accounts [--json]", RunFunc: accountsListCmd},
			{Name: "add", Help: "add an account: CODE --name N --type asset|liability|equity|revenue|expense [--json]; audited", RunFunc: accountsAddCmd},
		}},
		{Name: "rules", Sub: []cli.Command{
			{Name: "list", Help: rulesListHelp, RunFunc: rulesListCmd},
			{Name: "set", Help: rulesSetHelp, RunFunc: rulesSetCmd},
			{Name: "withdraw", Help: rulesWithdrawHelp, RunFunc: rulesWithdrawCmd},
		}},
		{Name: "replay", Help: replayHelp, RunFunc: replayCmd},
		{Name: "reconcile", Help: "compare every wallet transfer with the GL's entries; exit 1 on any difference [--json]", RunFunc: reconcileCmd},
		{Name: "verify", Help: "check the ledger's invariants on the live database; exit 1 when one fails [--json]", RunFunc: service.Verify},
		{Name: "status", Help: cli.StatusHelp, RunFunc: service.Status},
		service.Outbox(),
		service.Inbox(),
		service.Keys(),
		service.Events(),
		service.Audit(),
	}
}
