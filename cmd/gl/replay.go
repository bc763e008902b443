package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
	"walletgl/internal/serve"
)

const replayHelp = "rebuild the GL from the wallet's stream into an empty database, then check it against the wallet: " +
	"--from-start [--into URL] [--batch N] [--concurrency N] [--no-reconcile]; exit 1 when the stream no longer holds the whole history"

// replayCmd rebuilds the GL as a projection of the wallet's event stream: every
// TransferCompleted.v1 still on the stream goes, verified as live consumption verifies it,
// through the same inbox claim and posting handler as live posting, into an empty GL database:
// in batches of --batch events, --concurrency of them committing at once while the next is
// fetched and verified (Consumer.Replay), so not strictly in stream order; the inbox still
// posts each event once. It reads the stream through a
// consumer of its own (ephemeral, deleted at the end) and never touches the live "gl" consumer,
// the live GL database or the GL's stream: the acknowledgments the poster writes stay in the
// target's outbox, unpublished, since the wallet has had its acknowledgments from the live GL.
// Serving the target later (gl serve) would publish them; the wallet's inbox absorbs them, but
// empty the target's outbox first if that matters.
//
// A stream with limits retention forgets: events older than its limits, purged ones, a store
// lost with its broker. So the replay ends as gl reconcile does, comparing what it rebuilt with
// the wallet's transfers, and fails naming the transfers the stream no longer holds (and any
// entry for a transfer the wallet does not know). The wallet's listing is read before the
// stream, so transfers made during the replay are not taken for lost history. --no-reconcile
// skips the check, for a replay that must run while the wallet cannot be read.
func replayCmd(ctx context.Context, env cli.Env, args []string) error {
	var fromStart, noReconcile bool
	var into string
	var opts inbox.ReplayOptions
	var wallet walletSource
	cfg, _, err := service.Parse(env, args, func(s *config.Set) {
		s.Flags().BoolVar(&fromStart, "from-start", false, "replay from the stream's first event (required: the only mode)")
		s.Flags().StringVar(&into, "into", "", "URL of the empty GL database to rebuild into (default: a new database <current>_replay_<timestamp>)")
		s.Flags().IntVar(&opts.BatchSize, "batch", inbox.DefaultReplayBatchSize, "events verified and posted per transaction (several acknowledgment events past 1000)")
		s.Flags().IntVar(&opts.Concurrency, "concurrency", inbox.DefaultReplayConcurrency, "batch transactions in flight at once, while the next batch is fetched and verified")
		s.Flags().BoolVar(&noReconcile, "no-reconcile", false, "skip the check of the rebuild against the wallet's transfers (by default the replay ends with it and fails on any difference)")
		wallet.bind(s)
	})
	if err != nil {
		return err
	}
	if !fromStart {
		return errors.New("replay: say --from-start: a replay rebuilds the GL from the stream's first event")
	}
	if opts.BatchSize < 1 || opts.Concurrency < 1 {
		return fmt.Errorf("replay: --batch (%d) and --concurrency (%d) must be at least 1", opts.BatchSize, opts.Concurrency)
	}
	started := time.Now()
	target := into
	if target == "" {
		if target, err = replayDatabaseURL(cfg.DatabaseURL, started); err != nil {
			return err
		}
	}
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return err
	}
	log = log.With().Str("component", "replay").Logger()
	// A replay verifies every event as live consumption does: only the wallet's are posted.
	keys, err := cfg.Events.Signing.Keys(contract.SourceGL, contract.SourceWallet, false, log)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}

	targetDB, err := replayTarget(cfg.Postgres(), target)
	if err != nil {
		return err
	}
	pool, err := serve.OpenDatabase(ctx, targetDB, "gl", log)
	if err != nil {
		return fmt.Errorf("replay: open target: %w", err)
	}
	defer pool.Close()
	targetName := pool.Config().ConnConfig.Database
	ledger := postgres.NewLedger(pool)
	entries, processed, err := ledger.Size(ctx)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if entries > 0 || processed > 0 {
		return fmt.Errorf("replay: target database %s already has %d entries and %d processed events; replay only into an empty GL", targetName, entries, processed)
	}
	rules, err := copyLiveRules(ctx, cfg.DatabaseURL, ledger, log)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := checkRules(ctx, cfg, ledger); err != nil {
		return fmt.Errorf("replay: %w", err)
	}

	// The wallet's listing comes first: what the rebuild must hold is what the wallet had made
	// before the replay read the stream.
	var (
		source     gl.TransferSource
		sourceName func() string
		listing    []gl.SourceTransfer
	)
	if !noReconcile {
		var closeSource func()
		source, sourceName, closeSource, err = wallet.open(ctx, env)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		defer closeSource()
		if listing, err = source.Transfers(ctx); err != nil {
			return fmt.Errorf("replay: read the wallet's transfers to check the rebuild against (--no-reconcile skips the check): %w", err)
		}
	}

	nc, err := cfg.Events.Broker.Connect(ctx, "gl-replay", events.OperatorUser, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	topo := cfg.Events.Topology.WithLog(log)
	stream := topo.StreamName(contract.SourceWallet)
	// The replay's inbox is the GL consumer's (gl:<event id>), as in the live GL, so gl verify
	// holds in the target too; it reads through a broker consumer of its own (Consumer.Replay).
	// A rebuild answers nobody: duplicates in the stream are skipped, not acknowledged again.
	// It still says what each posting satisfies, so that an event waiting for it posts then.
	tp := posting.New(ledger, log)
	poster := struct {
		inbox.Handler
		inbox.Satisfier
	}{tp, tp}
	consCfg, err := cfg.Events.ConsumerFor(events.ConsumerGL, nil, keys.Trust)
	if err != nil {
		return err
	}
	handler, err := inbox.NewConsumer(consCfg, topo, nc, pool, poster, log)
	if err != nil {
		return err
	}
	log.Info().Str("stream", stream).Str("target", targetName).Msg("replay started")
	progress := newProgress(env.Stderr, log, time.Now())
	err = handler.Replay(ctx, opts, progress.update)
	progress.finish()
	if err != nil {
		return fmt.Errorf("replay stopped after %d events; drop database %s before replaying again: %w", progress.done, targetName, err)
	}

	stats := handler.Stats()
	entries, _, err = ledger.Size(ctx)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	elapsed := time.Since(started)
	fmt.Fprintf(env.Stdout, "gl replay: rebuilt database %s from stream %s in %s\n", targetName, stream, elapsed.Round(time.Millisecond))
	fmt.Fprintf(env.Stdout, "  events read          %d\n", stats.Processed+stats.Duplicates+stats.Failed+stats.Waited)
	fmt.Fprintf(env.Stdout, "  entries posted       %d\n", entries)
	fmt.Fprintf(env.Stdout, "  duplicates skipped   %d\n", stats.Duplicates)
	fmt.Fprintf(env.Stdout, "  dead-lettered        %d (see the target's inbox, status failed)\n", stats.Failed)
	fmt.Fprintf(env.Stdout, "  unauthenticated      %d (of those dead-lettered: not signed by a trusted key of the wallet, never posted)\n", stats.Unauthenticated)
	waiting, err := admin.New(pool).ListInbox(ctx, contract.StatusWaiting, admin.MaxLimit)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	fmt.Fprintf(env.Stdout, "  still waiting        %d (their originals are not in the stream; the target's inbox, status waiting)\n", len(waiting))
	for _, r := range waiting {
		fmt.Fprintf(env.Stdout, "    %s (%s) waits for %s\n", r.ID, r.EventType, r.WaitsFor)
	}
	fmt.Fprintf(env.Stdout, "  rate                 %.0f events/s\n", float64(progress.done)/max(time.Since(progress.started).Seconds(), 1e-9))
	fmt.Fprintf(env.Stdout, "  acknowledgments      left unpublished in %s's outbox\n", targetName)
	if noReconcile {
		fmt.Fprintf(env.Stdout, "check against the wallet: skipped (--no-reconcile)\n")
		fmt.Fprintf(env.Stdout, "next: GL_DATABASE_URL='%s' gl verify\n", redact(target))
		return nil
	}

	rec, err := gl.Reconciler{Rules: rules, Source: source, Ledger: ledger}.Against(ctx, listing)
	if err != nil {
		return fmt.Errorf("replay: check the rebuild against the wallet: %w", err)
	}
	warnDenied(env.Stderr, source)
	fmt.Fprintf(env.Stdout, "check against the wallet %s (its transfers as listed before the replay):\n", sourceName())
	writeReconciliation(env.Stdout, "  ", rec, false)
	if !rec.Agree() {
		if slices.ContainsFunc(rec.Differences, func(d gl.Difference) bool { return d.Kind == gl.DiffMissing }) {
			fmt.Fprintf(env.Stdout, "the stream no longer holds the whole history: re-publish the missing events from the wallet "+
				"(wallet outbox rebuild --since T: from its tables, the whole history) and replay again into an empty database\n")
		}
		return replayShortfall(rec)
	}
	fmt.Fprintf(env.Stdout, "next: GL_DATABASE_URL='%s' gl verify\n", redact(target))
	return nil
}

// copyLiveRules copies the live GL's posting rules (GL_DATABASE_URL, read only) into the
// target, so that the rebuild posts every event by the rule the live GL posted it by, and
// returns the target's rules after the copy. A live database without posting rules (a GL
// older than migration 00008, or none at all) leaves the target's seed rules, with a warning.
func copyLiveRules(ctx context.Context, liveURL string, target *postgres.Ledger, log zerolog.Logger) (gl.Rules, error) {
	live, err := cli.OpenDatabase(ctx, liveURL, cli.ReadOnly)
	if err != nil {
		return gl.Rules{}, fmt.Errorf("open the live GL database to copy its posting rules: %w", err)
	}
	defer live.Close()
	rules, err := postgres.NewLedger(live).Rules(ctx)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		log.Warn().Str("database", live.Config().ConnConfig.Database).Msg("the live GL database has no posting rules; replaying by the seed rules")
		return target.Rules(ctx)
	case err != nil:
		return gl.Rules{}, fmt.Errorf("read the live GL's posting rules: %w", err)
	}
	if err := copyAccounts(ctx, postgres.NewLedger(live), target); err != nil {
		return gl.Rules{}, err
	}
	if err := target.CopyRules(ctx, rules); err != nil {
		return gl.Rules{}, err
	}
	return target.Rules(ctx)
}

// copyAccounts adds the live chart's accounts the target lacks: the rules name them.
func copyAccounts(ctx context.Context, live, target *postgres.Ledger) error {
	accounts, err := live.Accounts(ctx)
	if err != nil {
		return fmt.Errorf("read the live chart of accounts: %w", err)
	}
	for _, a := range accounts {
		if _, err := target.AddAccount(ctx, a); err != nil && !errors.Is(err, gl.ErrAccountExists) {
			return fmt.Errorf("copy account %s: %w", a.Code, err)
		}
	}
	return nil
}

// replayShortfall is the error of a rebuild that does not reconcile with the wallet, naming
// the transfers in question.
func replayShortfall(rec gl.Reconciliation) error {
	byKind := map[string][]string{}
	for _, d := range rec.Differences {
		byKind[d.Kind] = append(byKind[d.Kind], d.TransferID)
	}
	var parts []string
	if ids := byKind[gl.DiffMissing]; len(ids) > 0 {
		parts = append(parts, fmt.Sprintf("%d transfers of the wallet have no entry, the stream no longer holds their events: %s", len(ids), idList(ids)))
	}
	if ids := byKind[gl.DiffExtra]; len(ids) > 0 {
		parts = append(parts, fmt.Sprintf("entries for %d transfers the wallet does not have: %s", len(ids), idList(ids)))
	}
	if ids := append(byKind[gl.DiffDuplicate], byKind[gl.DiffMismatch]...); len(ids) > 0 {
		parts = append(parts, fmt.Sprintf("%d transfers posted twice or not as the wallet made them: %s", len(ids), idList(ids)))
	}
	return fmt.Errorf("replay: the rebuilt GL does not reconcile with the wallet: %s", strings.Join(parts, "; "))
}

// idList names the first ids and counts the rest: an error message stays one readable line.
func idList(ids []string) string {
	const shown = 10
	if len(ids) <= shown {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:shown], ", "), len(ids)-shown)
}

// replayDatabaseURL names the default target: the current database's name with
// _replay_<timestamp>, on the same server.
func replayDatabaseURL(current string, now time.Time) (string, error) {
	cfg, err := pgx.ParseConfig(current)
	if err != nil {
		return "", fmt.Errorf("replay: parse GL_DATABASE_URL: %w", err)
	}
	name := cfg.Database + "_replay_" + strings.ToLower(now.UTC().Format("20060102t150405"))
	if len(name) > 63 { // PostgreSQL's identifier limit; keep the distinguishing suffix
		name = name[len(name)-63:]
	}
	return database.WithDatabase(current, cfg.Database, name), nil
}

// replayTarget is the database a replay rebuilds into, at target: created and migrated with the
// owner's URL of the GL's own database (GL_MIGRATE_DATABASE_URL) naming the target instead, so
// that the replay posts as the runtime role, as gl serve does.
func replayTarget(current serve.Database, target string) (serve.Database, error) {
	d := serve.Database{URL: target, MigrateOnStart: true}
	if current.MigrateURL == "" {
		return d, nil
	}
	owner, err := database.IdentityOf(current.MigrateURL)
	if err != nil {
		return d, fmt.Errorf("replay: GL_MIGRATE_DATABASE_URL: %w", err)
	}
	to, err := database.IdentityOf(target)
	if err != nil {
		return d, fmt.Errorf("replay: target: %w", err)
	}
	d.MigrateURL = database.WithDatabase(current.MigrateURL, owner.Database, to.Database)
	return d, nil
}

// redact hides a password in a URL printed for the operator to copy.
func redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		return dbURL
	}
	return u.Redacted()
}

// progress shows events done / total, rate and time left: one line rewritten in place on a
// terminal, a log line every few seconds otherwise.
type progress struct {
	w        io.Writer
	log      zerolog.Logger
	terminal bool
	started  time.Time
	last     time.Time
	done     uint64
	total    uint64
	drawn    bool
}

func newProgress(w io.Writer, log zerolog.Logger, started time.Time) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, log: log, terminal: ok && isatty.IsTerminal(f.Fd()), started: started}
}

func (p *progress) update(done, total uint64) {
	p.done, p.total = done, total
	now := time.Now()
	every := 5 * time.Second
	if p.terminal {
		every = 200 * time.Millisecond
	}
	if now.Sub(p.last) < every && done < total {
		return
	}
	p.last = now
	elapsed := now.Sub(p.started).Seconds()
	rate := float64(done) / max(elapsed, 1e-9)
	left := time.Duration(0)
	if rate > 0 && total > done {
		left = time.Duration(float64(total-done) / rate * float64(time.Second))
	}
	percent := 100.0
	if total > 0 {
		percent = 100 * float64(done) / float64(total)
	}
	if p.terminal {
		fmt.Fprintf(p.w, "\rreplay: %d/%d events (%.1f%%), %.0f/s, %s left   ", done, total, percent, rate, left.Round(time.Second))
		p.drawn = true
		return
	}
	p.log.Info().Uint64("done", done).Uint64("total", total).Float64("percent", percent).
		Float64("per_second", rate).Str("left", left.Round(time.Second).String()).Msg("replay progress")
}

func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
