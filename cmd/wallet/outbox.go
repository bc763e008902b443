package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/events/admin"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/glapi"
	"walletgl/internal/wallet/postgres"
)

// The wallet's own outbox commands, beside those every outbox has (cli.Service.Outbox).

func outboxReconcileCmd(ctx context.Context, env cli.Env, args []string) error {
	var dryRun bool
	own := func(s *config.Set) {
		s.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change and change nothing")
	}
	return service.Run(ctx, env, args, cli.ReadWrite, own, func(c cli.Call[*Config]) error {
		gl := glapi.New(c.Settings.GLURL, c.Settings.GLAPIKey)
		report, err := admin.New(c.Pool).Reconcile(ctx, glPosted(gl), dryRun)
		if err != nil {
			return err
		}
		if !dryRun && len(report.Changed) > 0 {
			if err := cli.AuditCommand(ctx, c.Pool, "outbox.reconcile", fmt.Sprintf("%d rows", len(report.Changed)), report.Changed); err != nil {
				return err
			}
		}
		if c.JSON {
			return cli.JSON(env.Stdout, report)
		}
		verb := "acknowledged"
		if dryRun {
			verb = "would acknowledge"
		}
		for _, r := range report.Changed {
			fmt.Fprintf(env.Stdout, "%s %s (was %s): transfer %s, %s\n", verb, r.ID, r.From, r.AggregateID, r.Note)
		}
		fmt.Fprintf(env.Stdout, "checked %d rows (%s): %d %s, %d not posted by the GL yet\n",
			report.Checked, strings.Join(admin.ReconcileStatuses, ", "), len(report.Changed), verb, report.NotPosted)
		return nil
	})
}

// glPosted asks the GL's HTTP API whether it holds a journal entry for the transfer of the
// outbox row: the GL's database is the GL's alone.
func glPosted(gl *glapi.Client) admin.PostedFunc {
	return func(ctx context.Context, row admin.OutboxRow) (bool, string, error) {
		entries, err := gl.EntriesOfTransfer(ctx, row.AggregateID)
		if err != nil {
			return false, "", err
		}
		if len(entries) == 0 {
			return false, "", nil
		}
		return true, "GL entry " + entries[0].ID, nil
	}
}

// outboxRepublishCmd sends the acknowledged rows created in a period back to pending, so the
// relay of a running wallet publishes them again under their ids: the way to rebuild a stream
// that lost its history (gl replay --from-start names what it lacks).
func outboxRepublishCmd(ctx context.Context, env cli.Env, args []string) error {
	var sinceFlag, untilFlag string
	own := func(s *config.Set) {
		s.Flags().StringVar(&sinceFlag, "since", "", "start of the period, RFC 3339 (e.g. 2026-11-30T00:00:00Z): rows created at or after it (required)")
		s.Flags().StringVar(&untilFlag, "until", "", "end of the period, RFC 3339: rows created before it (default: no end)")
	}
	return service.Run(ctx, env, args, cli.ReadWrite, own, func(c cli.Call[*Config]) error {
		if len(c.Args) > 0 {
			return fmt.Errorf("outbox republish: unexpected arguments %q; the period is --since T [--until T]", c.Args)
		}
		since, until, err := period("outbox republish", sinceFlag, untilFlag)
		if err != nil {
			return err
		}
		out, err := admin.New(c.Pool).RepublishOutbox(ctx, since, until)
		if err != nil {
			return err
		}
		period := since.Format(time.RFC3339) + ".." + untilFlag
		if err := cli.AuditCommand(ctx, c.Pool, "outbox.republish", period, out); err != nil {
			return err
		}
		if c.JSON {
			return cli.JSON(env.Stdout, out)
		}
		writeRepublished(env, out, c.Settings.Events.Relay.Retention)
		return nil
	})
}

// writeRepublished tells what went back to pending, and what an old period may lack.
func writeRepublished(env cli.Env, out admin.Republished, retention time.Duration) {
	end := "now"
	if out.Until != nil {
		end = out.Until.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(env.Stdout, "%d acknowledged rows created from %s to %s back to pending: the relay publishes them again under their ids\n",
		out.Requeued, out.Since.Format(time.RFC3339Nano), end)
	if horizon := time.Now().Add(-retention); out.Since.Before(horizon) {
		fmt.Fprintf(env.Stdout, "note: acknowledged rows are deleted after EVENTS_RETENTION (%s): events acknowledged before %s may be gone and cannot be republished\n",
			retention, horizon.UTC().Format(time.RFC3339))
	}
	if out.Requeued > 0 {
		fmt.Fprintln(env.Stdout, "the GL's inbox recognises the events it posted and answers each with a fresh acknowledgment: "+
			"the rows return to acknowledged by themselves (wallet outbox stats)")
	}
}

// outboxRebuildCmd publishes again every event of the wallet's movements in a period,
// re-created from its transfers, reversals and holds (postgres.Store.RebuildEvents): the
// source of a GL rebuilt from scratch once the stream's limits and the outbox's retention have
// forgotten the events, where outbox republish reaches only the rows retention kept.
func outboxRebuildCmd(ctx context.Context, env cli.Env, args []string) error {
	var sinceFlag, untilFlag string
	var batch int
	own := func(s *config.Set) {
		s.Flags().StringVar(&sinceFlag, "since", "", "start of the period, RFC 3339 (e.g. 2026-11-30T00:00:00Z): movements made at or after it (required)")
		s.Flags().StringVar(&untilFlag, "until", "", "end of the period, RFC 3339: movements made before it (default: no end)")
		s.Flags().IntVar(&batch, "batch", wallet.DefaultRebuildBatchSize, fmt.Sprintf("events written per transaction (at most %d)", wallet.MaxRebuildBatchSize))
	}
	return service.Run(ctx, env, args, cli.ReadWrite, own, func(c cli.Call[*Config]) error {
		if len(c.Args) > 0 {
			return fmt.Errorf("outbox rebuild: unexpected arguments %q; the period is --since T [--until T]", c.Args)
		}
		since, until, err := period("outbox rebuild", sinceFlag, untilFlag)
		if err != nil {
			return err
		}
		if batch < 1 || batch > wallet.MaxRebuildBatchSize {
			return fmt.Errorf("outbox rebuild: --batch must be from 1 to %d, got %d", wallet.MaxRebuildBatchSize, batch)
		}
		eventType, err := c.Settings.transferEventType()
		if err != nil {
			return err
		}
		store := postgres.NewStore(c.Pool, postgres.Options{TransferEventType: eventType})
		out, err := store.RebuildEvents(ctx, wallet.RebuildRequest{Since: since, Until: until, EventType: eventType, BatchSize: batch})
		// What a rebuild that stopped half way wrote stays written: it is recorded too.
		if err == nil || out.Batches > 0 {
			if aerr := cli.AuditCommand(ctx, c.Pool, "outbox.rebuild", since.Format(time.RFC3339)+".."+untilFlag, out); aerr != nil {
				return errors.Join(err, aerr)
			}
		}
		if err != nil {
			return err
		}
		if c.JSON {
			return cli.JSON(env.Stdout, out)
		}
		writeRebuilt(env, out)
		return nil
	})
}

// period reads --since (required) and --until (optional) as RFC 3339 times.
func period(command, sinceFlag, untilFlag string) (since, until time.Time, err error) {
	if sinceFlag == "" {
		return since, until, fmt.Errorf("%s: --since is required (RFC 3339, e.g. 2026-11-30T00:00:00Z)", command)
	}
	if since, err = time.Parse(time.RFC3339, sinceFlag); err != nil {
		return since, until, fmt.Errorf("%s: --since %q is not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)", command, sinceFlag)
	}
	if untilFlag != "" {
		if until, err = time.Parse(time.RFC3339, untilFlag); err != nil {
			return since, until, fmt.Errorf("%s: --until %q is not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)", command, untilFlag)
		}
	}
	return since, until, nil
}

// writeRebuilt tells what the rebuild found in the wallet's tables and what became of it.
func writeRebuilt(env cli.Env, out wallet.Rebuilt) {
	end := "now"
	if out.Until != nil {
		end = out.Until.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(env.Stdout, "%d events of the movements made from %s to %s (batches: %d):\n",
		out.Events, out.Since.Format(time.RFC3339Nano), end, out.Batches)
	types := make([]string, 0, len(out.ByType))
	for t := range out.ByType {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		fmt.Fprintf(env.Stdout, "  %-22s %d\n", t, out.ByType[t])
	}
	fmt.Fprintf(env.Stdout, "  re-created pending     %d (their outbox rows had been deleted)\n", out.Created)
	fmt.Fprintf(env.Stdout, "  acknowledged, pending  %d (sent back to pending)\n", out.Republished)
	fmt.Fprintf(env.Stdout, "  left on their way      %d (pending, in flight, failed or dead_letter: see wallet outbox stats)\n", out.Left)
	if out.Created+out.Republished > 0 {
		fmt.Fprintln(env.Stdout, "the relay publishes them under their ids: a GL posts those it lacks and answers the others again (wallet outbox stats)")
	}
}
