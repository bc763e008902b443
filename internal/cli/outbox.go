package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"walletgl/internal/config"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
)

// The outbox commands of both binaries: <program> outbox stats | list | show | requeue, on the
// service's own database through admin.Admin. They need no broker and never migrate.

// Outbox is the group `<program> outbox …`: the commands every outbox has, then extra, the
// service's own (the wallet's reconcile and republish).
func (svc Service[S]) Outbox(extra ...Command) Command {
	return Command{Name: "outbox", Sub: append([]Command{
		{Name: "stats", Help: "outbox rows per status, oldest pending and unacknowledged age [--json]", RunFunc: svc.outboxStats},
		{Name: "list", Help: "outbox rows of one status: --status S [--limit N] [--json]", RunFunc: svc.outboxList},
		{Name: "show", Help: "one outbox row with its payload: ID [--json]", RunFunc: svc.outboxShow},
		{Name: "requeue", Help: "failed/dead_letter rows back to pending: ID... | --status S [--json]", RunFunc: svc.outboxRequeue},
	}, extra...)}
}

func (svc Service[S]) outboxStats(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadOnly, nil, func(c Call[S]) error {
		stats, err := admin.New(c.Pool).OutboxStats(ctx)
		if err != nil {
			return err
		}
		return writeStats(env, c.JSON, stats, contract.OutboxStatuses, stats.Counts,
			"oldest pending:        "+age(stats.OldestPending, stats.OldestPendingAge),
			"oldest unacknowledged: "+age(stats.OldestUnacknowledged, stats.OldestUnacknowledgedAge))
	})
}

// writeStats prints stats as JSON, or for people its counts per status, in the statuses' order,
// and the lines after them.
func writeStats(env Env, asJSON bool, stats any, statuses []string, counts map[string]int64, after ...string) error {
	if asJSON {
		return JSON(env.Stdout, stats)
	}
	rows := make([][]string, 0, len(statuses))
	for _, s := range statuses {
		rows = append(rows, []string{s, strconv.FormatInt(counts[s], 10)})
	}
	if err := Table(env.Stdout, []string{"STATUS", "ROWS"}, rows); err != nil {
		return err
	}
	for _, line := range after {
		fmt.Fprintln(env.Stdout, line)
	}
	return nil
}

func age(at *time.Time, d time.Duration) string {
	if at == nil {
		return "none"
	}
	return fmt.Sprintf("%s (created %s)", d.Round(time.Second), at.Format(time.RFC3339))
}

// listFlags adds what both list commands take: --status (default def, "" when it is required)
// and --limit.
func listFlags(status *string, def string, statuses []string, limit *int) func(*config.Set) {
	return func(s *config.Set) {
		usage := "the status to list: " + strings.Join(statuses, ", ")
		if def == "" {
			usage += " (required)"
		}
		s.Flags().StringVar(status, "status", def, usage)
		s.Flags().IntVar(limit, "limit", admin.DefaultLimit, "rows to list, oldest first (at most 1000)")
	}
}

// checkLimit refuses a --limit outside 1..admin.MaxLimit, as the HTTP API does: a limit is
// never quietly changed.
func checkLimit(limit int) error {
	if limit < 1 || limit > admin.MaxLimit {
		return fmt.Errorf("--limit must be from 1 to %d, got %d", admin.MaxLimit, limit)
	}
	return nil
}

// writeList prints rows as JSON, or for people a table of header and each row's cells, then how
// many rows of the status it showed under which limit.
func writeList[R any](env Env, asJSON bool, rows []R, header []string, cells func(R) []string, status string, limit int) error {
	if asJSON {
		return JSON(env.Stdout, rows)
	}
	table := make([][]string, 0, len(rows))
	for _, r := range rows {
		table = append(table, cells(r))
	}
	if err := Table(env.Stdout, header, table); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%d %s rows shown (limit %d)\n", len(rows), status, limit)
	return nil
}

func (svc Service[S]) outboxList(ctx context.Context, env Env, args []string) error {
	var status string
	var limit int
	return svc.Run(ctx, env, args, ReadOnly, listFlags(&status, "", contract.OutboxStatuses, &limit), func(c Call[S]) error {
		if status == "" {
			return errors.New("outbox list: --status is required (" + strings.Join(contract.OutboxStatuses, ", ") + ")")
		}
		if err := checkLimit(limit); err != nil {
			return fmt.Errorf("outbox list: %w", err)
		}
		rows, err := admin.New(c.Pool).ListOutbox(ctx, status, limit)
		if err != nil {
			return err
		}
		header := []string{"ID", "STATUS", "AGGREGATE", "ATTEMPTS", "CREATED", "LAST ERROR"}
		return writeList(env, c.JSON, rows, header, func(r admin.OutboxRow) []string {
			return []string{r.ID.String(), r.Status, r.AggregateID, strconv.Itoa(int(r.Attempts)),
				r.CreatedAt.UTC().Format(time.RFC3339), Clip(r.LastError, 60)}
		}, status, limit)
	})
}

func (svc Service[S]) outboxShow(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadOnly, nil, func(c Call[S]) error {
		if len(c.Args) != 1 {
			return errors.New("outbox show: give one outbox row id")
		}
		id, err := admin.ParseOutboxIDs(c.Args)
		if err != nil {
			return err
		}
		row, err := admin.New(c.Pool).GetOutbox(ctx, id[0])
		if err != nil {
			return err
		}
		if c.JSON {
			return JSON(env.Stdout, row)
		}
		return writeOutboxRow(env, row)
	})
}

// writeOutboxRow prints every column of row, then its payload.
func writeOutboxRow(env Env, row admin.OutboxRow) error {
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	seq := "-"
	if row.StreamSeq != nil {
		seq = strconv.FormatInt(*row.StreamSeq, 10)
	}
	created := row.CreatedAt
	err := Table(env.Stdout, []string{"FIELD", "VALUE"}, [][]string{
		{"id", row.ID.String()}, {"event_type", row.EventType}, {"aggregate_id", row.AggregateID},
		{"status", row.Status}, {"attempts", strconv.Itoa(int(row.Attempts))},
		{"publish_count", strconv.Itoa(int(row.PublishCount))}, {"last_error", OrDash(row.LastError)},
		{"next_attempt_at", at(row.NextAttemptAt)}, {"lease_owner", OrDash(row.LeaseOwner)},
		{"lease_until", at(row.LeaseUntil)}, {"stream_seq", seq}, {"created_at", at(&created)},
		{"dispatched_at", at(row.DispatchedAt)}, {"acknowledged_at", at(row.AcknowledgedAt)},
		{"trace_context", OrDash(row.TraceContext)},
	})
	if err != nil {
		return err
	}
	var payload any
	if json.Unmarshal(row.Payload, &payload) == nil {
		fmt.Fprintln(env.Stdout, "payload:")
		return JSON(env.Stdout, payload)
	}
	fmt.Fprintf(env.Stdout, "payload: %s\n", row.Payload)
	return nil
}

func (svc Service[S]) outboxRequeue(ctx context.Context, env Env, args []string) error {
	var status string
	own := func(s *config.Set) {
		s.Flags().StringVar(&status, "status", "", "requeue every row of this status (failed or dead_letter) instead of ids")
	}
	return svc.Run(ctx, env, args, ReadWrite, own, func(c Call[S]) error {
		ops := admin.New(c.Pool)
		var out admin.Requeued
		var err error
		switch {
		case (len(c.Args) == 0) == (status == ""):
			return errors.New("outbox requeue: give outbox row ids, or --status failed|dead_letter")
		case status != "":
			out, err = ops.RequeueOutboxStatus(ctx, status)
		default:
			ids, perr := admin.ParseOutboxIDs(c.Args)
			if perr != nil {
				return perr
			}
			out, err = ops.RequeueOutbox(ctx, ids...)
		}
		if err != nil {
			return err
		}
		target := status
		if target == "" {
			target = strings.Join(c.Args, ",")
		}
		if err := AuditCommand(ctx, c.Pool, "outbox.requeue", target, out); err != nil {
			return err
		}
		if err := writeRequeued(env, out, c.JSON); err != nil {
			return err
		}
		if len(out.Refused) > 0 {
			return fmt.Errorf("outbox requeue: %d of the ids were not requeued (only failed and dead_letter rows are)", len(out.Refused))
		}
		return nil
	})
}

func writeRequeued(env Env, out admin.Requeued, asJSON bool) error {
	if asJSON {
		return JSON(env.Stdout, out)
	}
	for _, id := range out.IDs {
		fmt.Fprintf(env.Stdout, "requeued %s\n", id)
	}
	for _, r := range out.Refused {
		fmt.Fprintf(env.Stdout, "refused  %s: %s\n", r.ID, refusal(r))
	}
	fmt.Fprintf(env.Stdout, "%d rows back to pending, %d refused\n", len(out.IDs), len(out.Refused))
	return nil
}

func refusal(r admin.Refusal) string {
	if r.Status == "" {
		return "no such outbox row"
	}
	return "it is " + r.Status + "; only failed and dead_letter rows are requeued"
}
