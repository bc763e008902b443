package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	glpostgres "walletgl/internal/gl/postgres"
	"walletgl/internal/systemtest"
)

// The scale phase (target 4): the GL's reads timed on a ledger of 100k lines and again
// after it grew to -scale-lines, the ratio between the two the figure that says whether a read
// grows with the ledger.
const (
	// ScaleSmallLines is the first size the reads are timed at.
	ScaleSmallLines = 100_000
	// scaleCheckpointLines are the lines loaded between two balance checkpoints: what serve
	// leaves between two (postgres.DefaultCheckpointLines: one once 2,000 lines were posted,
	// looked for every second) at 1,000 entries/s, about the whole pipeline's sustained rate on
	// the 2-core machine.
	scaleCheckpointLines = 2_000
	// scaleTailLines are the lines after the latest checkpoint when the reads are timed, the
	// same at both sizes: what a read meets on average at that rate, half a checkpoint's lines
	// plus the second a checkpoint stays behind now (1.5 s at 2,000 lines/s).
	scaleTailLines = 3_000
	// ScaleMinLines is the smallest ledger the phase loads: a checkpoint and the tail after it.
	ScaleMinLines = scaleCheckpointLines + scaleTailLines
	// scaleReads is how many times each read is timed at each size: the p99 is the tenth
	// slowest, not the second (with 200, target 4's ratio of two sub-millisecond p99s moved
	// from 0.84× to 2.05× between runs of the same code).
	scaleReads = 1000
)

// scaleAccounts is the loaded chart: the GL's own two accounts and the others a ledger grows,
// each pair a kind of entry, the first ones the most frequent.
var (
	scaleAccounts = []gl.Account{
		{Code: "1020", Name: "Cash at the settlement bank", Type: "asset", NormalBalance: gl.Debit},
		{Code: "1030", Name: "Card receivables", Type: "asset", NormalBalance: gl.Debit},
		{Code: "2030", Name: "Merchant payables", Type: "liability", NormalBalance: gl.Credit},
		{Code: "3010", Name: "Retained earnings", Type: "equity", NormalBalance: gl.Credit},
		{Code: "4010", Name: "Transfer fees", Type: "revenue", NormalBalance: gl.Credit},
		{Code: "4020", Name: "FX margin", Type: "revenue", NormalBalance: gl.Credit},
		{Code: "5010", Name: "Bank charges", Type: "expense", NormalBalance: gl.Debit},
		{Code: "5020", Name: "Card scheme fees", Type: "expense", NormalBalance: gl.Debit},
	}
	// debit, credit: the entry's two lines.
	scalePairs = [][2]string{
		{"1010", "2010"}, {"2010", "1010"}, {"2010", "2030"}, {"2030", "1020"}, {"1030", "2010"},
		{"2010", "4010"}, {"1020", "4020"}, {"5010", "1020"}, {"5020", "1030"}, {"4010", "3010"},
	}
	scaleCurrencies = []string{"USD", "EUR", "GBP", "CHF", "JPY"}
)

// Scale is the scale phase's report.
type Scale struct {
	Sizes []ScaleSize `json:"sizes"`
	// Ratio per read: the larger size's p99 ÷ the smaller size's.
	Ratios map[string]float64 `json:"ratios"`
	Error  string             `json:"error,omitempty"` // the phase failed: its targets are not measured
}

// ScaleSize is the reads timed at one size of the ledger.
type ScaleSize struct {
	Lines       int64              `json:"lines"`
	Checkpoints int64              `json:"checkpoints"`
	TailLines   int64              `json:"tail_lines"`   // after the latest checkpoint
	LoadSeconds float64            `json:"load_seconds"` // loading the lines added for this size
	Reads       map[string]Latency `json:"reads"`
}

// The reads, as the GL's HTTP API serves them.
const (
	readBalance   = "account balance"
	readBalanceAs = "balance as of a time"
	readTrial     = "trial balance"
)

// ScaleReads are the reads in the order they are shown.
var ScaleReads = []string{readBalance, readBalanceAs, readTrial}

// measureScale creates a GL database of its own, loads it to 100k lines, times the reads, grows
// it to lines and times them again.
func measureScale(ctx context.Context, opts Options, runID string, out io.Writer) (*Scale, error) {
	url, err := systemtest.DatabaseURL(opts.DatabaseURL, runID+"_scale_gl")
	if err != nil {
		return nil, err
	}
	if err := scratchDatabase(ctx, url, "gl", 0); err != nil {
		return nil, fmt.Errorf("scale database: %w", err)
	}
	defer func() {
		if !opts.Keep {
			_ = database.Drop(context.WithoutCancel(ctx), url)
		}
	}()
	// The reads go through the pool the service opens, in process.
	pool, err := database.Open(ctx, url, database.ServiceMaxConns)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	l, err := newScaleLoader(ctx, pool, out, opts.TTY)
	if err != nil {
		return nil, err
	}
	sc := &Scale{Ratios: map[string]float64{}}
	for _, size := range []int64{min(ScaleSmallLines, int64(opts.ScaleLines)), int64(opts.ScaleLines)} {
		if size <= l.lines.Load() {
			continue
		}
		fmt.Fprintf(out, "scale: loading the GL to %d lines …\n", size)
		s, err := l.growTo(ctx, size)
		if err != nil {
			return sc, err
		}
		fmt.Fprintf(out, "  %d lines in %.1fs (%d checkpoints); timing each read %d times …\n", s.Lines, s.LoadSeconds, s.Checkpoints, scaleReads)
		if s.Reads, err = l.timeReads(ctx); err != nil {
			return sc, err
		}
		for _, r := range ScaleReads {
			fmt.Fprintf(out, "  %-22s %s\n", r, latText(s.Reads[r]))
		}
		sc.Sizes = append(sc.Sizes, *s)
	}
	if n := len(sc.Sizes); n >= 2 && sc.Sizes[0].Lines == ScaleSmallLines {
		for _, r := range ScaleReads {
			sc.Ratios[r] = round(Ratio(sc.Sizes[n-1].Reads[r].P99, sc.Sizes[0].Reads[r].P99), 2)
		}
	}
	return sc, nil
}

// scaleLoader grows the ledger in chunks, one checkpoint after each, as serve takes them while
// the GL posts.
type scaleLoader struct {
	pool        *pgxpool.Pool
	ledger      *glpostgres.Ledger
	out         io.Writer
	tty         bool
	lines       atomic.Int64 // loaded so far (read by the progress line)
	checkpoints atomic.Int64 // taken so far
	entries     int64        // the last entry's number: ids are made from it
	first       time.Time    // the first line's posting time
	posted      time.Time    // the latest line's posting time
	through     time.Time    // the latest checkpoint's
}

// newScaleLoader adds the loaded chart's accounts to the empty GL database behind pool.
func newScaleLoader(ctx context.Context, pool *pgxpool.Pool, out io.Writer, tty bool) (*scaleLoader, error) {
	ledger := glpostgres.NewLedger(pool)
	for _, a := range scaleAccounts {
		if _, err := ledger.AddAccount(ctx, a); err != nil {
			return nil, fmt.Errorf("scale chart of accounts: %w", err)
		}
	}
	return &scaleLoader{pool: pool, ledger: ledger, out: out, tty: tty}, nil
}

// growTo loads entries until the ledger holds size lines, the last scaleTailLines of them after
// the latest checkpoint.
func (l *scaleLoader) growTo(ctx context.Context, size int64) (*ScaleSize, error) {
	started := time.Now()
	stop := progress(ctx, l.out, l.tty, func() string {
		return fmt.Sprintf("scale  %5.1fs  lines %9d/%d  checkpoints %d", time.Since(started).Seconds(), l.lines.Load(), size, l.checkpoints.Load())
	})
	defer stop()
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	// The load only: the per-row triggers (the deferred balance check, the foreign keys) are
	// skipped on this connection, so the loaded entries are built balanced, in one currency, on
	// accounts of the chart; the reads run on the pool's other connections, triggers on.
	if _, err := conn.Exec(ctx, "SET session_replication_role = replica"); err != nil {
		return nil, fmt.Errorf("skip triggers for the load: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET session_replication_role") }()
	for bulk := size - scaleTailLines; l.lines.Load() < bulk; {
		if err := l.load(ctx, conn, min(scaleCheckpointLines, bulk-l.lines.Load())); err != nil {
			return nil, err
		}
		if err := l.checkpoint(ctx); err != nil {
			return nil, err
		}
	}
	// As autovacuum would on a production server (it is off on the bench's): statistics, and
	// the visibility map the index-only scans rely on.
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE journal_lines, journal_entries, balance_checkpoints"); err != nil {
		return nil, fmt.Errorf("vacuum the loaded ledger: %w", err)
	}
	if err := l.load(ctx, conn, size-l.lines.Load()); err != nil {
		return nil, err
	}
	// The load writes far faster than any GL posts, so it ends with PostgreSQL's write-back of
	// it still to come: a checkpoint its WAL started, spread over minutes
	// (checkpoint_completion_target), and shared buffers full of dirty pages that a read's miss
	// may have to write out first. The reads would then time the load's aftermath, by how
	// much of it overlaps them, not the ledger's size; one forced checkpoint ends it first.
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return nil, fmt.Errorf("checkpoint after the load: %w", err)
	}
	return &ScaleSize{Lines: l.lines.Load(), Checkpoints: l.checkpoints.Load(), TailLines: scaleTailLines,
		LoadSeconds: round(time.Since(started).Seconds(), 1)}, nil
}

// loadEntries writes $2 balanced entries numbered after $1 (two lines each, on one of 1,000
// wallets, their processed inbox rows), posted evenly over ($3, $4]: after the latest checkpoint, and at least a second
// before now, so that the next checkpoint covers them. Ids are in insertion order like the
// services' UUIDv7s; entry kinds and currencies are skewed towards the first of each list.
const loadEntries = `WITH src AS MATERIALIZED (
    SELECT ('01900000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid AS id,
           '01910000-0000-7000-8000-' || lpad(to_hex(g), 12, '0') AS event_id,
           '01920000-0000-7000-8000-' || lpad(to_hex(g), 12, '0') AS transfer_id,
           $3::timestamptz + ($4::timestamptz - $3::timestamptz) * ((g - $1::bigint)::float8 / $2::bigint) AS posted_at,
           1 + floor(power(random(), 2) * cardinality($5::text[]))::int AS kind,
           ($7::text[])[1 + floor(power(random(), 3) * cardinality($7::text[]))::int] AS currency,
           1 + floor(random() * random() * 100000)::bigint AS amount,
           'w' || (g % 1000)::text AS wallet_id
    FROM generate_series($1::bigint + 1, $1::bigint + $2::bigint) AS g
), entries AS (
    INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, posted_at)
    SELECT id, event_id, transfer_id, currency, posted_at - interval '5 milliseconds', posted_at FROM src
), lines AS (
    INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at, wallet_id)
    SELECT s.id, CASE d.direction WHEN 'debit' THEN ($5::text[])[s.kind] ELSE ($6::text[])[s.kind] END,
           d.direction, s.amount, s.currency, s.posted_at, s.wallet_id
    FROM src s CROSS JOIN (VALUES ('debit'), ('credit')) AS d (direction)
), inbox AS (
    INSERT INTO inbox (id, consumer, event_id, event_type, status, received_at, processed_at, updated_at)
    SELECT $8::text || ':' || event_id, $8::text, event_id, $9::text, 'processed', posted_at, posted_at, posted_at FROM src
)
SELECT max(posted_at), min(posted_at) FROM src`

// load writes lines/2 entries.
func (l *scaleLoader) load(ctx context.Context, conn *pgxpool.Conn, lines int64) error {
	n := lines / 2
	if n <= 0 {
		return nil
	}
	lower := l.posted
	if l.through.After(lower) {
		lower = l.through
	}
	if lower.IsZero() {
		lower = time.Now().Add(-2 * time.Second)
	}
	// Two microseconds an entry at least: posted_at has microseconds, and an entry that
	// rounded down onto lower (a checkpoint's through) would be covered by that checkpoint.
	span := time.Duration(2*n) * time.Microsecond
	upper := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	for upper.Sub(lower) <= span { // a checkpoint taken a moment ago
		time.Sleep(time.Millisecond)
		upper = time.Now().Add(-time.Second).Truncate(time.Microsecond)
	}
	debits, credits := make([]string, len(scalePairs)), make([]string, len(scalePairs))
	for i, p := range scalePairs {
		debits[i], credits[i] = p[0], p[1]
	}
	var last, first time.Time
	if err := conn.QueryRow(ctx, loadEntries, l.entries, n, lower, upper, debits, credits, scaleCurrencies,
		events.ConsumerGL, contract.TypeTransferCompleted).Scan(&last, &first); err != nil {
		return fmt.Errorf("load %d entries: %w", n, err)
	}
	if l.first.IsZero() {
		l.first = first
	}
	l.entries += n
	l.lines.Add(2 * n)
	l.posted = last
	return nil
}

// checkpoint takes a balance checkpoint as serve does.
func (l *scaleLoader) checkpoint(ctx context.Context) error {
	through, taken, err := l.ledger.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if !taken || through.Before(l.posted) {
		return fmt.Errorf("balance checkpoint through %s does not cover the lines loaded up to %s", through, l.posted)
	}
	l.through = through
	l.checkpoints.Add(1)
	return nil
}

// timeReads times each read scaleReads times, after a few untimed calls that open the pool's
// connection and prepare the statements; accounts and currencies at random, "as of" at random
// times over the loaded period.
func (l *scaleLoader) timeReads(ctx context.Context) (map[string]Latency, error) {
	codes := []string{"1010", "2010"}
	for _, a := range scaleAccounts {
		codes = append(codes, a.Code)
	}
	span := l.posted.Sub(l.first)
	reads := map[string]func() error{
		readBalance: func() error {
			_, err := l.ledger.AccountBalance(ctx, codes[rand.IntN(len(codes))], scaleCurrencies[rand.IntN(len(scaleCurrencies))], nil)
			return err
		},
		readBalanceAs: func() error {
			at := l.first.Add(time.Duration(rand.Int64N(int64(span) + 1)))
			_, err := l.ledger.AccountBalance(ctx, codes[rand.IntN(len(codes))], scaleCurrencies[rand.IntN(len(scaleCurrencies))], &at)
			return err
		},
		readTrial: func() error {
			tb, err := l.ledger.TrialBalance(ctx)
			if err == nil && !tb.Balanced {
				err = fmt.Errorf("the trial balance of the loaded ledger does not net to zero")
			}
			return err
		},
	}
	res := map[string]Latency{}
	for _, name := range ScaleReads {
		read := reads[name]
		for range 5 {
			if err := read(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		lat := make([]time.Duration, 0, scaleReads)
		for range scaleReads {
			t0 := time.Now()
			if err := read(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			lat = append(lat, time.Since(t0))
		}
		res[name] = Summarize(lat)
	}
	return res, nil
}
