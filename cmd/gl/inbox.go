package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/cli"
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

// The operator's inbox commands: gl inbox stats | list | retry. They need the GL's database
// only, never the broker, and never migrate it.

// inboxCmd runs gl inbox's own command table; it is one row of the main table so the GL's
// other commands can grow beside it without touching these.
func inboxCmd(ctx context.Context, env cli.Env, args []string) error {
	return cli.Run(ctx, "gl inbox", []cli.Command{
		{Words: []string{"stats"}, Help: "inbox rows per status and duplicates absorbed", Run: inboxStatsCmd},
		{Words: []string{"list"}, Help: "inbox rows of one status: --status S (default failed) [--limit N]", Run: inboxListCmd},
		{Words: []string{"retry"}, Help: "process failed events again from their stored payload: ID...", Run: inboxRetryCmd},
	}, args, env)
}

// openInbox parses the command's own flags (fs) and the GL's configuration from args and
// connects to the GL's database; it returns the positional arguments.
func openInbox(ctx context.Context, env cli.Env, fs *flag.FlagSet, args []string) (Config, []string, *pgxpool.Pool, error) {
	rest, err := cli.ParseOwn(fs, args)
	if err != nil {
		return Config{}, nil, nil, err
	}
	cfg, set, err := loadConfig(fs.Name(), rest, env)
	if err != nil {
		return Config{}, nil, nil, err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, database.ToolMaxConns)
	if err != nil {
		return Config{}, nil, nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return Config{}, nil, nil, fmt.Errorf("connect to the GL database: %w", err)
	}
	return cfg, set.Args(), pool, nil
}

func inboxFlags(name string, env cli.Env) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs, fs.Bool("json", false, "print JSON instead of a table")
}

func inboxStatsCmd(ctx context.Context, env cli.Env, args []string) error {
	fs, asJSON := inboxFlags("gl inbox stats", env)
	_, _, pool, err := openInbox(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer pool.Close()
	stats, err := events.NewAdmin(pool).InboxStats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, stats)
	}
	rows := make([][]string, 0, len(events.InboxStatuses))
	for _, s := range events.InboxStatuses {
		rows = append(rows, []string{s, strconv.FormatInt(stats.Counts[s], 10)})
	}
	if err := cli.Table(env.Stdout, []string{"STATUS", "ROWS"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "duplicates absorbed: %d\n", stats.Duplicates)
	return nil
}

func inboxListCmd(ctx context.Context, env cli.Env, args []string) error {
	fs, asJSON := inboxFlags("gl inbox list", env)
	status := fs.String("status", "failed", "the status to list: "+strings.Join(events.InboxStatuses, ", "))
	limit := fs.Int("limit", events.DefaultAdminLimit, "rows to list, oldest first (at most 1000)")
	_, _, pool, err := openInbox(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := events.NewAdmin(pool).ListInbox(ctx, *status, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(env.Stdout, rows)
	}
	table := make([][]string, 0, len(rows))
	for _, r := range rows {
		detail := r.Detail
		if len(detail) > 60 {
			detail = detail[:59] + "…"
		}
		table = append(table, []string{r.ID, r.EventType, strconv.Itoa(int(r.Attempts)),
			r.ReceivedAt.UTC().Format(time.RFC3339), cli.OrDash(r.Reason), cli.OrDash(detail)})
	}
	if err := cli.Table(env.Stdout, []string{"ID", "TYPE", "ATTEMPTS", "RECEIVED", "REASON", "DETAIL"}, table); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%d %s rows shown (limit %d)\n", len(rows), *status, *limit)
	return nil
}

// inboxRetryCmd processes failed events again with the handler serve wires: the configured
// posting rule over the ledger.
func inboxRetryCmd(ctx context.Context, env cli.Env, args []string) error {
	fs, asJSON := inboxFlags("gl inbox retry", env)
	cfg, ids, pool, err := openInbox(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(ids) == 0 {
		return errors.New("inbox retry: give the ids of failed inbox rows (gl:<event id>, or the event id)")
	}
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return err
	}
	ledger := postgres.NewLedger(pool)
	if err := cfg.Rule.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	poster := gl.NewTransferPoster(cfg.Rule, ledger, log)
	out := events.NewInbox(events.ConsumerGL, poster).Retry(log.WithContext(ctx), pool, ids...)
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
	if *asJSON {
		if err := cli.JSON(env.Stdout, out); err != nil {
			return err
		}
	} else if err := cli.Table(env.Stdout, []string{"ID", "RESULT"}, rows); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("inbox retry: %d of %d events still fail", failed, len(out))
	}
	return nil
}
