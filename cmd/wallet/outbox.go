package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/cli"
	"walletgl/internal/database"
	"walletgl/internal/events"
)

// ops is what an operator subcommand starts from: its configuration, its positional arguments
// and a pool on the wallet's database. It needs no broker, and it never migrates: it looks at
// the database the service made.
type ops struct {
	cfg  Config
	args []string
	pool *pgxpool.Pool
}

func newFlags(name string, env cli.Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// openOps parses the command's own flags (fs) and the wallet's configuration from args and
// connects to the database.
func openOps(ctx context.Context, env cli.Env, fs *flag.FlagSet, args []string) (*ops, error) {
	rest, err := cli.ParseOwn(fs, args)
	if err != nil {
		return nil, err
	}
	cfg, set, err := loadConfig(fs.Name(), rest, env)
	if err != nil {
		return nil, err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, database.ToolMaxConns)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the wallet database: %w", err)
	}
	return &ops{cfg: cfg, args: set.Args(), pool: pool}, nil
}

func outboxStatsCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox stats", env)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	stats, err := events.NewAdmin(o.pool).OutboxStats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, stats)
	}
	rows := make([][]string, 0, len(events.OutboxStatuses))
	for _, s := range events.OutboxStatuses {
		rows = append(rows, []string{s, strconv.FormatInt(stats.Counts[s], 10)})
	}
	if err := cli.Table(env.Stdout, []string{"STATUS", "ROWS"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "oldest pending:        %s\n", age(stats.OldestPending, stats.OldestPendingAge))
	fmt.Fprintf(env.Stdout, "oldest unacknowledged: %s\n", age(stats.OldestUnacknowledged, stats.OldestUnacknowledgedAge))
	return nil
}

func age(at *time.Time, d time.Duration) string {
	if at == nil {
		return "none"
	}
	return fmt.Sprintf("%s (created %s)", d.Round(time.Second), at.Format(time.RFC3339))
}

func outboxListCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox list", env)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	status := fs.String("status", "", "the status to list: "+strings.Join(events.OutboxStatuses, ", ")+" (required)")
	limit := fs.Int("limit", events.DefaultAdminLimit, "rows to list, oldest first (at most 1000)")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	if *status == "" {
		return errors.New("outbox list: --status is required (" + strings.Join(events.OutboxStatuses, ", ") + ")")
	}
	rows, err := events.NewAdmin(o.pool).ListOutbox(ctx, *status, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, rows)
	}
	table := make([][]string, 0, len(rows))
	for _, r := range rows {
		table = append(table, []string{
			r.ID.String(), r.Status, r.AggregateID, strconv.Itoa(int(r.Attempts)),
			r.CreatedAt.UTC().Format(time.RFC3339), short(r.LastError, 60),
		})
	}
	if err := cli.Table(env.Stdout, []string{"ID", "STATUS", "AGGREGATE", "ATTEMPTS", "CREATED", "LAST ERROR"}, table); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%d %s rows shown (limit %d)\n", len(rows), *status, *limit)
	return nil
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func outboxShowCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox show", env)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	if len(o.args) != 1 {
		return errors.New("outbox show: give one outbox row id")
	}
	ids, err := events.ParseOutboxIDs(o.args)
	if err != nil {
		return err
	}
	row, err := events.NewAdmin(o.pool).GetOutbox(ctx, ids[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, row)
	}
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
	err = cli.Table(env.Stdout, []string{"FIELD", "VALUE"}, [][]string{
		{"id", row.ID.String()}, {"event_type", row.EventType}, {"aggregate_id", row.AggregateID},
		{"status", row.Status}, {"attempts", strconv.Itoa(int(row.Attempts))},
		{"publish_count", strconv.Itoa(int(row.PublishCount))}, {"last_error", cli.OrDash(row.LastError)},
		{"next_attempt_at", at(row.NextAttemptAt)}, {"lease_owner", cli.OrDash(row.LeaseOwner)},
		{"lease_until", at(row.LeaseUntil)}, {"stream_seq", seq}, {"created_at", at(&created)},
		{"dispatched_at", at(row.DispatchedAt)}, {"acknowledged_at", at(row.AcknowledgedAt)},
	})
	if err != nil {
		return err
	}
	var payload any
	if json.Unmarshal(row.Payload, &payload) == nil {
		fmt.Fprintln(env.Stdout, "payload:")
		return cli.JSON(env.Stdout, payload)
	}
	fmt.Fprintf(env.Stdout, "payload: %s\n", row.Payload)
	return nil
}

func outboxRequeueCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox requeue", env)
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	status := fs.String("status", "", "requeue every row of this status (failed or dead_letter) instead of ids")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	admin := events.NewAdmin(o.pool)
	var out events.Requeued
	switch {
	case (len(o.args) == 0) == (*status == ""):
		return errors.New("outbox requeue: give outbox row ids, or --status failed|dead_letter")
	case *status != "":
		out, err = admin.RequeueOutboxStatus(ctx, *status)
	default:
		ids, perr := events.ParseOutboxIDs(o.args)
		if perr != nil {
			return perr
		}
		out, err = admin.RequeueOutbox(ctx, ids...)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if err := cli.JSON(env.Stdout, out); err != nil {
			return err
		}
	} else {
		for _, id := range out.IDs {
			fmt.Fprintf(env.Stdout, "requeued %s\n", id)
		}
		for _, r := range out.Refused {
			fmt.Fprintf(env.Stdout, "refused  %s: %s\n", r.ID, refusal(r))
		}
		fmt.Fprintf(env.Stdout, "%d rows back to pending, %d refused\n", len(out.IDs), len(out.Refused))
	}
	if len(out.Refused) > 0 {
		return fmt.Errorf("outbox requeue: %d of the ids were not requeued (only failed and dead_letter rows are)", len(out.Refused))
	}
	return nil
}

func refusal(r events.Refusal) string {
	if r.Status == "" {
		return "no such outbox row"
	}
	return "it is " + r.Status + "; only failed and dead_letter rows are requeued"
}

func outboxReconcileCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox reconcile", env)
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	dryRun := fs.Bool("dry-run", false, "print what would change and change nothing")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	gl := &glClient{base: strings.TrimRight(o.cfg.GLURL, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	report, err := events.NewAdmin(o.pool).Reconcile(ctx, gl.posted, *dryRun)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, report)
	}
	verb := "acknowledged"
	if *dryRun {
		verb = "would acknowledge"
	}
	for _, c := range report.Changed {
		fmt.Fprintf(env.Stdout, "%s %s (was %s): transfer %s, %s\n", verb, c.ID, c.From, c.AggregateID, c.Note)
	}
	fmt.Fprintf(env.Stdout, "checked %d rows (%s): %d %s, %d not posted by the GL yet\n",
		report.Checked, strings.Join(events.ReconcileStatuses, ", "), len(report.Changed), verb, report.NotPosted)
	return nil
}

// glClient asks the GL's HTTP API what it posted: the GL's database is the GL's alone.
type glClient struct {
	base string
	http *http.Client
}

// posted reports whether the GL holds a journal entry for the transfer of the outbox row.
func (c *glClient) posted(ctx context.Context, row events.OutboxRow) (bool, string, error) {
	u := c.base + "/v1/entries?transfer_id=" + url.QueryEscape(row.AggregateID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, "", fmt.Errorf("ask the GL: %w", err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return false, "", fmt.Errorf("ask the GL: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return false, "", fmt.Errorf("read the GL's answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return false, "", fmt.Errorf("ask the GL for transfer %s: %s: %s", row.AggregateID, res.Status, short(string(body), 200))
	}
	var out struct {
		Entries []struct {
			ID      string `json:"id"`
			EventID string `json:"event_id"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return false, "", fmt.Errorf("decode the GL's entries of transfer %s: %w", row.AggregateID, err)
	}
	if len(out.Entries) == 0 {
		return false, "", nil
	}
	return true, "GL entry " + out.Entries[0].ID, nil
}

// outboxRepublishCmd sends the acknowledged rows created in a period back to pending, so the
// relay of a running wallet publishes them again under their ids: the way to rebuild a stream
// that lost its history (gl replay --from-start names what it lacks).
func outboxRepublishCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet outbox republish", env)
	asJSON := fs.Bool("json", false, "print JSON instead of lines")
	sinceFlag := fs.String("since", "", "start of the period, RFC 3339 (e.g. 2026-11-30T00:00:00Z): rows created at or after it (required)")
	untilFlag := fs.String("until", "", "end of the period, RFC 3339: rows created before it (default: no end)")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	if len(o.args) > 0 {
		return fmt.Errorf("outbox republish: unexpected arguments %q; the period is --since T [--until T]", o.args)
	}
	if *sinceFlag == "" {
		return errors.New("outbox republish: --since is required (RFC 3339, e.g. 2026-11-30T00:00:00Z)")
	}
	since, err := time.Parse(time.RFC3339, *sinceFlag)
	if err != nil {
		return fmt.Errorf("outbox republish: --since %q is not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)", *sinceFlag)
	}
	var until time.Time
	if *untilFlag != "" {
		if until, err = time.Parse(time.RFC3339, *untilFlag); err != nil {
			return fmt.Errorf("outbox republish: --until %q is not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)", *untilFlag)
		}
	}
	out, err := events.NewAdmin(o.pool).RepublishOutbox(ctx, since, until)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, out)
	}
	end := "now"
	if out.Until != nil {
		end = out.Until.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(env.Stdout, "%d acknowledged rows created from %s to %s back to pending: the relay publishes them again under their ids\n",
		out.Requeued, out.Since.Format(time.RFC3339Nano), end)
	if horizon := time.Now().Add(-o.cfg.Events.Retention); since.Before(horizon) {
		fmt.Fprintf(env.Stdout, "note: acknowledged rows are deleted after EVENTS_RETENTION (%s): events acknowledged before %s may be gone and cannot be republished\n",
			o.cfg.Events.Retention, horizon.UTC().Format(time.RFC3339))
	}
	if out.Requeued > 0 {
		fmt.Fprintln(env.Stdout, "the GL's inbox recognises the events it posted and answers each with a fresh acknowledgment: "+
			"the rows return to acknowledged by themselves (wallet outbox stats)")
	}
	return nil
}
