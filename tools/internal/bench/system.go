package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
	"walletgl/internal/systemtest"
)

// system is the run's world: its databases, its broker and the two services.
type system struct {
	dir                    string
	walletURL, glURL       string
	broker                 *systemtest.Broker
	wallet, gl             *systemtest.Process
	walletDB, glDB         *pgxpool.Pool
	admin                  *pgxpool.Pool // the server's maintenance database
	walletDBName, glDBName string
	// The services' GET /metrics without API keys (WALLET_METRICS_ADDR, GL_METRICS_ADDR), as a
	// Prometheus scrapes them.
	walletMetrics, glMetrics string
	// onRestart runs once a service the bench stopped answers again (Run scrapes both then: the
	// backlog, or what the GL missed, is still there to be seen).
	onRestart func(ctx context.Context)
}

func startSystem(ctx context.Context, opts Options, runID, dir string, bins systemtest.Binaries, natsBin string) (*system, error) {
	s := &system{dir: dir, walletDBName: runID + "_wallet", glDBName: runID + "_gl"}
	var err error
	if s.walletURL, err = systemtest.DatabaseURL(opts.DatabaseURL, s.walletDBName); err != nil {
		return s, err
	}
	if s.glURL, err = systemtest.DatabaseURL(opts.DatabaseURL, s.glDBName); err != nil {
		return s, err
	}
	if s.admin, err = database.Open(ctx, opts.DatabaseURL, 2); err != nil {
		return s, err
	}
	brokers, err := systemtest.StartBrokers(ctx, natsBin, dir, 1)
	if err != nil {
		return s, err
	}
	s.broker = brokers[0]
	// Signed events, as in production: what the bench measures includes signing and verifying.
	keys, err := systemtest.MakeEventKeys(ctx, bins, filepath.Join(dir, "keys"))
	if err != nil {
		return s, err
	}
	common := []string{
		"NATS_URL=" + s.broker.URL(), "EVENTS_NAMESPACE=bench", "LOG_FORMAT=json", "LOG_LEVEL=warn",
		// One key drives the whole load: its allowance must not be what the bench measures.
		"WALLET_RATE_LIMIT=1000000:1000000",
	}
	if s.walletMetrics, err = systemtest.FreeAddr(); err != nil {
		return s, err
	}
	if s.glMetrics, err = systemtest.FreeAddr(); err != nil {
		return s, err
	}
	if opts.ServiceProcs > 0 { // before the settings added: -wallet-env GOMAXPROCS=… wins
		common = append(common, "GOMAXPROCS="+strconv.Itoa(opts.ServiceProcs))
	}
	walletEnv := slices.Concat(keys.Env(contract.SourceWallet), common, []string{"WALLET_METRICS_ADDR=" + s.walletMetrics}, opts.WalletEnv)
	if s.wallet, err = systemtest.Service("wallet", bins.Wallet, "WALLET", s.walletURL, dir, walletEnv); err != nil {
		return s, err
	}
	glEnv := slices.Concat(keys.Env(contract.SourceGL), common, []string{"GL_METRICS_ADDR=" + s.glMetrics}, opts.GLEnv)
	if s.gl, err = systemtest.Service("gl", bins.GL, "GL", s.glURL, dir, glEnv); err != nil {
		return s, err
	}
	for _, p := range []*systemtest.Process{s.wallet, s.gl} {
		if err := startAndWait(ctx, p); err != nil {
			return s, err
		}
	}
	if s.walletDB, err = database.Open(ctx, s.walletURL, 8); err != nil {
		return s, err
	}
	if s.glDB, err = database.Open(ctx, s.glURL, 4); err != nil {
		return s, err
	}
	return s, nil
}

func startAndWait(ctx context.Context, p *systemtest.Process) error {
	if err := p.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return p.WaitHealthy(ctx)
}

func (s *system) pids() map[string]int {
	m := map[string]int{}
	if s.wallet != nil {
		m["wallet"] = s.wallet.PID()
	}
	if s.gl != nil {
		m["gl"] = s.gl.PID()
	}
	if s.broker != nil {
		m["nats-server"] = s.broker.PID()
	}
	return m
}

// afterRestart calls onRestart when p, just started again, is healthy, without holding up the
// caller; wait waits for it.
func (s *system) afterRestart(ctx context.Context, p *systemtest.Process) (wait func()) {
	if s.onRestart == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if p.WaitHealthy(ctx) == nil {
			s.onRestart(ctx)
		}
	}()
	return func() { <-done }
}

// waitAcknowledged waits until no outbox row of either service waits for the other, or
// timeout: after the backlog phase, whose rows have no transfer, waitQuiet's totals never agree.
func (s *system) waitAcknowledged(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		wallet, err := unacknowledged(ctx, s.walletDB)
		gl, glErr := unacknowledged(ctx, s.glDB)
		if err == nil && glErr == nil && wallet+gl == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outbox rows not acknowledged after %s: wallet %d, gl %d (%v)", timeout, wallet, gl, errors.Join(err, glErr))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeTargets are the services' metrics endpoints.
func (s *system) scrapeTargets() []scrapeTarget {
	return []scrapeTarget{
		{service: "wallet", url: "http://" + s.walletMetrics + "/metrics"},
		{service: "gl", url: "http://" + s.glMetrics + "/metrics"},
	}
}

// stop stops the services and the broker gracefully and closes the pools.
func (s *system) stop() []error {
	var errs []error
	for _, p := range []*systemtest.Process{s.wallet, s.gl} {
		if p != nil {
			if err := p.Stop(20 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.broker != nil {
		_ = s.broker.Stop(10 * time.Second)
	}
	for _, pool := range []*pgxpool.Pool{s.walletDB, s.glDB} {
		if pool != nil {
			pool.Close()
		}
	}
	return errs
}

func (s *system) dropDatabases(ctx context.Context) {
	_ = database.Drop(ctx, s.walletURL)
	_ = database.Drop(ctx, s.glURL)
}

// counts reads how many transfers the wallet committed and how many entries the GL posted.
func (s *system) counts(ctx context.Context) (transfers, entries int64, err error) {
	if err := s.walletDB.QueryRow(ctx, "SELECT count(*) FROM transfers").Scan(&transfers); err != nil {
		return 0, 0, fmt.Errorf("count transfers: %w", err)
	}
	if err := s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries); err != nil {
		return 0, 0, fmt.Errorf("count entries: %w", err)
	}
	return transfers, entries, nil
}

// The harness samples while the services run, and its queries run on the same PostgreSQL: a
// count(*) of a whole table that grows by a hundred thousand rows would cost more the longer a
// run lasts (10 ms and more, ten times a second while a backlog drains). The samples therefore
// count only rows written since a moment, through the created_at / posted_at indexes.

// countsSince reads how many transfers were committed and entries posted since t.
func (s *system) countsSince(ctx context.Context, t time.Time) (transfers, entries int64, err error) {
	if err := s.walletDB.QueryRow(ctx, "SELECT count(*) FROM transfers WHERE created_at >= $1", t).Scan(&transfers); err != nil {
		return 0, 0, fmt.Errorf("count transfers: %w", err)
	}
	if entries, err = s.entriesSince(ctx, t); err != nil {
		return 0, 0, err
	}
	return transfers, entries, nil
}

// entriesSince reads how many entries the GL posted since t.
func (s *system) entriesSince(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	if err := s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries WHERE posted_at >= $1", t).Scan(&n); err != nil {
		return 0, fmt.Errorf("count entries: %w", err)
	}
	return n, nil
}

// unacknowledged counts the wallet's outbox rows the GL has not acknowledged yet.
func (s *system) unacknowledged(ctx context.Context) (int64, error) {
	return unacknowledged(ctx, s.walletDB)
}

// unacknowledged counts the outbox rows of a service's database the other service has not
// acknowledged yet (through the outbox's partial indexes: the statuses the relay still works
// on, and dispatched).
func unacknowledged(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox WHERE status IN ('pending', 'dispatching', 'failed'))
		+ (SELECT count(*) FROM outbox WHERE status = 'dispatched')`).Scan(&n)
	return n, err
}

// settle writes out what the run wrote before a measured phase: a CHECKPOINT of the server, then
// the kernel's dirty pages (sync). Left in the page cache, the writes of setting up (creating
// the databases, funding the wallets, pgbench's tables) or of the phase before went to disk 30 s
// later (the kernel's dirty_expire), in the middle of the next phase, and every commit of the
// machine waited behind them for the WAL's flush: 160-180 ms at once, on this machine.
func (s *system) settle(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	_, err := s.admin.Exec(ctx, "CHECKPOINT")
	syscall.Sync()
	if err != nil {
		return time.Since(start), fmt.Errorf("checkpoint (needs superuser or pg_checkpoint): %w", err)
	}
	return time.Since(start), nil
}

// waitQuiet waits until every transfer is posted and acknowledged, or timeout.
func (s *system) waitQuiet(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	var t, e int64
	for {
		// Every transfer's row acknowledged means every transfer posted; the totals confirm it.
		if open, err := s.unacknowledged(ctx); err == nil && open == 0 {
			if t, e, err = s.counts(ctx); err == nil && t == e {
				return time.Since(start), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("not quiet after %s (transfers %d, entries %d)", timeout, t, e)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// transferTimes is one transfer's commit, posting and acknowledgment times.
type transferTimes struct {
	created, dispatched, claimed, posted, acked time.Time
}

// pipelineTimes reads, for every transfer committed in [from, to], when it was written
// (transfers.created_at), posted (journal_entries.posted_at) and acknowledged
// (outbox.acknowledged_at).
func (s *system) pipelineTimes(ctx context.Context, from, to time.Time) ([]transferTimes, error) {
	rows, err := s.walletDB.Query(ctx, `
		SELECT t.id::text, t.created_at, o.dispatched_at, o.acknowledged_at
		FROM transfers t LEFT JOIN outbox o ON o.id = t.event_id
		WHERE t.created_at >= $1 AND t.created_at <= $2`, from, to)
	if err != nil {
		return nil, fmt.Errorf("read transfer times: %w", err)
	}
	byID := map[string]*transferTimes{}
	var ids []string
	for rows.Next() {
		var (
			id                string
			created           time.Time
			dispatched, acked *time.Time
		)
		if err := rows.Scan(&id, &created, &dispatched, &acked); err != nil {
			rows.Close()
			return nil, err
		}
		tt := &transferTimes{created: created}
		if acked != nil {
			tt.acked = *acked
		}
		if dispatched != nil {
			tt.dispatched = *dispatched
		}
		byID[id] = tt
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	entries, err := s.glDB.Query(ctx, `
		SELECT e.transfer_id, e.posted_at, i.received_at
		FROM journal_entries e JOIN inbox i ON i.id = 'gl:' || e.event_id
		WHERE e.transfer_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read entry times: %w", err)
	}
	for entries.Next() {
		var (
			id              string
			posted, claimed time.Time
		)
		if err := entries.Scan(&id, &posted, &claimed); err != nil {
			entries.Close()
			return nil, err
		}
		if tt := byID[id]; tt != nil {
			tt.posted, tt.claimed = posted, claimed
		}
	}
	entries.Close()
	out := make([]transferTimes, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out, entries.Err()
}

// setupWallets creates the funding wallet and users u1…u<users> through the API, then gives
// every user a large balance from the funding wallet so that no transfer of the load is refused.
func setupWallets(ctx context.Context, c *systemtest.Client, users int) error {
	if err := c.CreateWallet(ctx, "funding", "USD", true); err != nil {
		return err
	}
	for i := 1; i <= users; i++ {
		id := fmt.Sprintf("u%d", i)
		if err := c.CreateWallet(ctx, id, "USD", false); err != nil {
			return err
		}
		resp, err := c.Transfer(ctx, "fund-"+id, systemtest.TransferRequest{FromWalletID: "funding", ToWalletID: id, Amount: 1_000_000_000_000, Currency: "USD"})
		if err != nil {
			return err
		}
		if resp.Status != 201 && resp.Status != 200 {
			return fmt.Errorf("fund %s: %d %s", id, resp.Status, resp.Body)
		}
	}
	return nil
}

// writeBacklog writes n TransferCompleted rows to the wallet's outbox through events.Outbox,
// the wallet's own writer, in transactions of 1000 rows on 4 connections. No transfer rows go
// with them: the benchmark measures the relay and the GL, and the GL only reads the event.
func writeBacklog(ctx context.Context, pool *pgxpool.Pool, n int) error {
	box := outbox.New(contract.SourceWallet)
	const perTx, workers = 1000, 4
	jobs := make(chan int)
	errc := make(chan error, workers)
	for range workers {
		go func() {
			for size := range jobs {
				// No retry: the rows are new, and nothing else writes them meanwhile.
				err := database.WithTx(ctx, pool, func(tx pgx.Tx) error {
					for range size {
						id, transfer := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
						now := time.Now().UTC()
						if _, err := box.Add(ctx, tx, outbox.Event{
							ID: id, Type: contract.TypeTransferCompletedV2, AggregateID: transfer.String(), Time: now,
							Data: contract.TransferCompleted{TransferID: transfer.String(), FromWalletID: "u1", ToWalletID: "u2",
								Amount: 1, Currency: "USD", Kind: contract.KindTransfer, CreatedAt: now},
						}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errc <- err
					// Take the remaining jobs so that the producer can finish.
					for range jobs {
					}
					return
				}
			}
			errc <- nil
		}()
	}
	for left := n; left > 0; left -= perTx {
		jobs <- min(left, perTx)
	}
	close(jobs)
	var first error
	for range workers {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}
