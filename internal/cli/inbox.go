package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"walletgl/internal/config"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
)

// The inbox commands of both binaries: <program> inbox stats | list | retry | abandon | resolve, on
// the service's own database. They need no broker and never migrate.

// Inbox is the group `<program> inbox …`.
func (svc Service[S]) Inbox() Command {
	return Command{Name: "inbox", Sub: []Command{
		{Name: "stats", Help: "inbox rows per status, failed ones per reason, and duplicates absorbed [--json]", RunFunc: svc.inboxStats},
		{Name: "list", Help: "inbox rows of one status: --status S (default failed) [--limit N] [--json]", RunFunc: svc.inboxList},
		{Name: "retry", Help: "process failed or waiting events again from their stored payload: ID... [--json]", RunFunc: svc.inboxRetry},
		{Name: "abandon", Help: "give up on waiting events: fail them as abandoned, payload kept for a later retry: ID... [--json]", RunFunc: svc.inboxAbandon},
		{Name: "resolve", Help: "close failed events no retry cures, never to be applied: ID... --reason TEXT [--json]", RunFunc: svc.inboxResolve},
	}}
}

func (svc Service[S]) inboxStats(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadOnly, nil, func(c Call[S]) error {
		stats, err := admin.New(c.Pool).InboxStats(ctx)
		if err != nil {
			return err
		}
		reasons := make([]string, len(contract.FailureReasons))
		for i, r := range contract.FailureReasons {
			reasons[i] = fmt.Sprintf("%s %d", r, stats.FailedByReason[r])
		}
		return writeStats(env, c.JSON, stats, contract.InboxStatuses, stats.Counts,
			fmt.Sprintf("duplicates absorbed: %d", stats.Duplicates),
			"failed by reason: "+strings.Join(reasons, ", "))
	})
}

func (svc Service[S]) inboxList(ctx context.Context, env Env, args []string) error {
	var status string
	var limit int
	return svc.Run(ctx, env, args, ReadOnly, listFlags(&status, "failed", contract.InboxStatuses, &limit), func(c Call[S]) error {
		if err := checkLimit(limit); err != nil {
			return fmt.Errorf("inbox list: %w", err)
		}
		rows, err := admin.New(c.Pool).ListInbox(ctx, status, limit)
		if err != nil {
			return err
		}
		header := []string{"ID", "TYPE", "ATTEMPTS", "RECEIVED", "REASON", "DETAIL"}
		why := func(r admin.InboxRow) string { return r.Reason }
		if status == contract.StatusWaiting {
			header[4], why = "WAITS FOR", func(r admin.InboxRow) string { return r.WaitsFor }
		}
		return writeList(env, c.JSON, rows, header, func(r admin.InboxRow) []string {
			return []string{r.ID, r.EventType, strconv.Itoa(int(r.Attempts)),
				r.ReceivedAt.UTC().Format(time.RFC3339), OrDash(why(r)), OrDash(Clip(r.Detail, 60))}
		}, status, limit)
	})
}

// inboxRetry processes failed events again with the handler serve gives the service's consumer
// (InboxHandlerFunc), through the inbox as a delivery would.
func (svc Service[S]) inboxRetry(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadWrite, nil, func(c Call[S]) error {
		if len(c.Args) == 0 {
			return fmt.Errorf("inbox retry: give the ids of failed inbox rows (%s:<event id>, or the event id)", svc.Consumer)
		}
		log, err := c.Settings.Logging().Logger(env.Stderr, svc.Name)
		if err != nil {
			return err
		}
		handler, err := svc.InboxHandlerFunc(ctx, c.Settings, c.Pool, log)
		if err != nil {
			return err
		}
		out := inbox.New(svc.Consumer, handler).Retry(log.WithContext(ctx), c.Pool, c.Args...)
		if err := AuditCommand(ctx, c.Pool, "inbox.retry", strings.Join(c.Args, ","), out); err != nil {
			return err
		}
		failed := 0
		rows := make([][]string, 0, len(out))
		for _, r := range out {
			result := "processed"
			if r.Error != "" {
				failed++
				result = "still failed: " + r.Error
			}
			rows = append(rows, []string{r.ID, result})
		}
		if c.JSON {
			err = JSON(env.Stdout, out)
		} else {
			err = Table(env.Stdout, []string{"ID", "RESULT"}, rows)
		}
		if err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("inbox retry: %d of %d events still fail", failed, len(out))
		}
		return nil
	})
}

// inboxAbandon gives up on waiting events: an operator knows that what they wait for will
// never post (purged, lost with the broker). They are failed as abandoned; inbox retry still
// applies one whose original turns up after all.
func (svc Service[S]) inboxAbandon(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadWrite, nil, func(c Call[S]) error {
		if len(c.Args) == 0 {
			return fmt.Errorf("inbox abandon: give the ids of waiting inbox rows (%s:<event id>, or the event id)", svc.Consumer)
		}
		log, err := c.Settings.Logging().Logger(env.Stderr, svc.Name)
		if err != nil {
			return err
		}
		out := inbox.New(svc.Consumer, nil).Abandon(log.WithContext(ctx), c.Pool, c.Args...)
		if err := AuditCommand(ctx, c.Pool, "inbox.abandon", strings.Join(c.Args, ","), out); err != nil {
			return err
		}
		refused := 0
		rows := make([][]string, 0, len(out))
		for _, r := range out {
			result := "failed as " + contract.ReasonAbandoned
			if r.Error != "" {
				refused++
				result = "refused: " + r.Error
			}
			rows = append(rows, []string{r.ID, result})
		}
		if c.JSON {
			err = JSON(env.Stdout, out)
		} else {
			err = Table(env.Stdout, []string{"ID", "RESULT"}, rows)
		}
		if err != nil {
			return err
		}
		if refused > 0 {
			return fmt.Errorf("inbox abandon: %d of %d events refused", refused, len(out))
		}
		return nil
	})
}

// inboxResolve closes failed events for good with the operator's reason, as the console and the
// GL's POST /v1/admin/inbox/resolve do: the rows and their audit record (inbox.resolve, the
// operator as actor and as resolved_by) commit together, or neither.
func (svc Service[S]) inboxResolve(ctx context.Context, env Env, args []string) error {
	var reason string
	own := func(s *config.Set) {
		s.Flags().StringVar(&reason, "reason", "", fmt.Sprintf("why the events are closed without being applied, kept on each row and in the audit trail (required, at most %d characters)", admin.MaxResolutionLen))
	}
	return svc.Run(ctx, env, args, ReadWrite, own, func(c Call[S]) error {
		switch {
		case len(c.Args) == 0:
			return fmt.Errorf("inbox resolve: give the ids of failed inbox rows (%s:<event id>, or the event id)", svc.Consumer)
		case strings.TrimSpace(reason) == "":
			return errors.New(`inbox resolve: --reason is required: say why the events are closed without being applied (--reason "…")`)
		}
		ids := make([]string, len(c.Args))
		for i, id := range c.Args {
			ids[i] = svc.inboxID(id)
		}
		out, err := admin.ResolveInboxAudited(ctx, c.Pool, auditOperator, Operator().Name, reason, "cli", ids...)
		if err != nil {
			return fmt.Errorf("inbox resolve: %w", err)
		}
		if err := writeResolved(env, out, c.JSON); err != nil {
			return err
		}
		if len(out.Refused) > 0 {
			return fmt.Errorf("inbox resolve: %d of %d events refused", len(out.Refused), len(out.IDs)+len(out.Refused))
		}
		return nil
	})
}

// inboxID is the inbox id of id: as given when it names the service's consumer, else the
// event id under it.
func (svc Service[S]) inboxID(id string) string {
	if strings.HasPrefix(id, svc.Consumer+":") {
		return id
	}
	return svc.Consumer + ":" + id
}

// writeResolved prints out as JSON (the GL endpoint's answer), or for people one row per id:
// resolved, or refused and why.
func writeResolved(env Env, out admin.Resolved, asJSON bool) error {
	if asJSON {
		return JSON(env.Stdout, out)
	}
	rows := make([][]string, 0, len(out.IDs)+len(out.Refused))
	for _, id := range out.IDs {
		rows = append(rows, []string{id, "resolved"})
	}
	for _, r := range out.Refused {
		why := "no such inbox row"
		if r.Status != "" {
			why = "it is " + r.Status + "; only failed events are resolved"
		}
		rows = append(rows, []string{r.ID, "refused: " + why})
	}
	return Table(env.Stdout, []string{"ID", "RESULT"}, rows)
}
