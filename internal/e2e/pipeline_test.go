// Package e2e_test runs the real binaries as a user would and checks the whole pipeline.
package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
)

type system struct {
	wallet, gl       *systemtest.Process
	walletAPI, glAPI *systemtest.Client
	walletDB, glDB   *pgxpool.Pool
	// For the operator commands a test runs with the same binaries and settings.
	bins                 systemtest.Binaries
	walletDBURL, glDBURL string
	walletAddr, glAddr   string
	natsURL, namespace   string
	common               []string
	keys                 systemtest.EventKeys // each service's event signing key, made with its binary
}

func startSystem(t *testing.T, extraEnv ...string) *system {
	t.Helper()
	natsURL := envtest.NATSURL(t)
	return startSystemOn(t, natsURL, true, extraEnv...)
}

// startSystemOn starts both services against natsURL; waitHealthy=false returns as soon as
// they listen (for a broker that is not there yet).
func startSystemOn(t *testing.T, natsURL string, waitHealthy bool, extraEnv ...string) *system {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	bins, err := systemtest.Build(ctx, dir)
	require.NoError(t, err)

	keys, err := systemtest.MakeEventKeys(ctx, bins, filepath.Join(dir, "keys"))
	require.NoError(t, err)
	walletURL, glURL := envtest.DatabaseURL(t), envtest.DatabaseURL(t)
	ns := "e2e"
	if waitHealthy {
		ns = envtest.Namespace(t, natsURL)
	}
	walletAddr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	glAddr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	common := append([]string{
		"NATS_URL=" + natsURL, "EVENTS_NAMESPACE=" + ns, envtest.StreamEnv, "LOG_FORMAT=json", "LOG_LEVEL=info",
		"EVENTS_POLL_INTERVAL=500ms", "EVENTS_ACK_TIMEOUT=10s",
	}, extraEnv...)
	s := &system{
		wallet: &systemtest.Process{Name: "wallet", Bin: bins.Wallet, Args: []string{"serve"}, Addr: walletAddr,
			Log: filepath.Join(dir, "wallet.log"),
			Env: slices.Concat([]string{"WALLET_DATABASE_URL=" + walletURL, "WALLET_HTTP_ADDR=" + walletAddr, "GL_URL=http://" + glAddr},
				keys.Env(contract.SourceWallet), common)},
		gl: &systemtest.Process{Name: "gl", Bin: bins.GL, Args: []string{"serve"}, Addr: glAddr,
			Log: filepath.Join(dir, "gl.log"),
			Env: slices.Concat([]string{"GL_DATABASE_URL=" + glURL, "GL_HTTP_ADDR=" + glAddr}, keys.Env(contract.SourceGL), common)},
		walletAPI: systemtest.NewClient(walletAddr),
		glAPI:     systemtest.NewClient(glAddr),
		bins:      bins, walletDBURL: walletURL, glDBURL: glURL, walletAddr: walletAddr, glAddr: glAddr,
		natsURL: natsURL, namespace: ns, common: common, keys: keys,
	}
	for _, p := range []*systemtest.Process{s.wallet, s.gl} {
		require.NoError(t, p.Start())
		t.Cleanup(func() {
			if err := p.Stop(20 * time.Second); err != nil {
				t.Errorf("graceful stop: %v", err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", p.Name, p.Tail(40))
			}
		})
	}
	if waitHealthy {
		waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, s.wallet.WaitHealthy(waitCtx))
		require.NoError(t, s.gl.WaitHealthy(waitCtx))
	}
	s.walletAPI.Key, s.glAPI.Key = createKey(t, s.wallet), createKey(t, s.gl)
	// The operator commands that call the other service take its key from the environment.
	s.common = append(s.common, "WALLET_API_KEY="+s.walletAPI.Key, "GL_API_KEY="+s.glAPI.Key)
	s.walletDB = openPool(t, walletURL)
	s.glDB = openPool(t, glURL)
	return s
}

// createKey makes an admin API key with the service's binary, once the service has created its
// database (it may still be starting).
func createKey(t *testing.T, p *systemtest.Process) string {
	t.Helper()
	var key string
	require.Eventually(t, func() bool {
		var err error
		key, err = p.CreateKey(context.Background(), "admin")
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "create an API key of %s", p.Name)
	return key
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Open(context.Background(), url, 4)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestEveryTransferIsPostedExactlyOnceAndAcknowledged(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "funding", "USD", true))
	users := make([]string, 8)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
		require.NoError(t, s.walletAPI.CreateWallet(ctx, users[i], "USD", false))
	}

	const transfers = 300
	rng := rand.New(rand.NewPCG(1, 2))
	type job struct {
		key string
		req systemtest.TransferRequest
	}
	jobs := make([]job, transfers)
	for i := range jobs {
		from := "funding"
		if i >= 40 && rng.IntN(2) == 0 { // after the first funding rounds, half move money between users
			from = users[rng.IntN(len(users))]
		}
		to := users[rng.IntN(len(users))]
		for to == from {
			to = users[rng.IntN(len(users))]
		}
		jobs[i] = job{key: fmt.Sprintf("e2e-%d", i), req: systemtest.TransferRequest{FromWalletID: from, ToWalletID: to, Amount: int64(1 + rng.IntN(500)), Currency: "USD"}}
	}

	var (
		mu        sync.Mutex
		confirmed = map[string]string{} // idempotency key -> transfer id
		refused   int
	)
	send := func(j job) {
		resp, err := s.walletAPI.Transfer(ctx, j.key, j.req)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		switch resp.Status {
		case http.StatusCreated, http.StatusOK:
			var tr systemtest.Transfer
			require.NoError(t, resp.Decode(&tr))
			if prev, ok := confirmed[j.key]; ok {
				require.Equal(t, prev, tr.ID, "a replayed key returns the original transfer")
			}
			confirmed[j.key] = tr.ID
		case http.StatusUnprocessableEntity, http.StatusConflict:
			refused++ // insufficient funds between users, or the same key in flight
		default:
			t.Errorf("transfer %s: %d %s", j.key, resp.Status, resp.Body)
		}
	}
	// The first 40 fund the users one at a time; the rest go 16 at a time, and every fifth
	// request is sent twice at once (a client retrying before the first answer).
	for _, j := range jobs[:40] {
		send(j)
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				send(j)
			}
		}()
	}
	for i, j := range jobs[40:] {
		work <- j
		if i%5 == 0 {
			work <- j
		}
	}
	close(work)
	wg.Wait()
	// Replays after the fact return the same transfer and create nothing.
	for _, j := range jobs[:60] {
		send(j)
	}
	t.Logf("confirmed %d transfers, %d refused", len(confirmed), refused)
	require.Greater(t, len(confirmed), transfers/2)

	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&pending))
		return pending == 0
	}, 60*time.Second, 200*time.Millisecond, "every outbox row reaches acknowledged")

	var transfersInDB, outboxRows int
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM transfers").Scan(&transfersInDB))
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE event_type = 'TransferCompleted.v2'").Scan(&outboxRows))
	require.Equal(t, len(confirmed), transfersInDB, "one transfer per idempotency key")
	require.Equal(t, len(confirmed), outboxRows, "one outbox row per transfer")

	// Every transfer has exactly one entry in the GL with the same amount and currency.
	rows, err := s.walletDB.Query(ctx, "SELECT id::text, amount, currency FROM transfers")
	require.NoError(t, err)
	want := map[string]string{}
	for rows.Next() {
		var id, currency string
		var amount int64
		require.NoError(t, rows.Scan(&id, &amount, &currency))
		want[id] = fmt.Sprintf("%d %s", amount, currency)
	}
	require.NoError(t, rows.Err())
	rows, err = s.glDB.Query(ctx, `
		SELECT e.transfer_id, sum(l.amount) FILTER (WHERE l.direction = 'debit'),
		       sum(l.amount) FILTER (WHERE l.direction = 'credit'), e.currency
		FROM journal_entries e JOIN journal_lines l ON l.entry_id = e.id
		GROUP BY e.id`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var id, currency string
		var debits, credits int64
		require.NoError(t, rows.Scan(&id, &debits, &credits, &currency))
		require.Equal(t, debits, credits, "entry of transfer %s balances", id)
		_, seen := got[id]
		require.False(t, seen, "transfer %s posted twice", id)
		got[id] = fmt.Sprintf("%d %s", debits, currency)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got)

	// The GL's own acknowledgment rows reach acknowledged too (by the wallet consumer's ack floor).
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&pending))
		return pending == 0
	}, 30*time.Second, 200*time.Millisecond)

	requireMetrics(t, s)

	// The trial balance over the API nets to zero.
	resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/trial-balance", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	var tb struct {
		Balanced bool `json:"balanced"`
	}
	require.NoError(t, resp.Decode(&tb))
	require.True(t, tb.Balanced)
}

// requireMetrics scrapes both services' GET /metrics (with their admin keys, which imply
// metrics:read) and checks that the pipeline's metrics are there and moved with the load.
func requireMetrics(t *testing.T, s *system) {
	t.Helper()
	ctx := context.Background()
	scrape := func(c *systemtest.Client) string {
		resp, err := c.Do(ctx, http.MethodGet, "/metrics", nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status)
		return string(resp.Body)
	}
	moved := func(body, series string) {
		t.Helper()
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, series) {
				fields := strings.Fields(line)
				require.NotEqual(t, "0", fields[len(fields)-1], "%s has not moved", series)
				return
			}
		}
		t.Errorf("no series %s in:\n%s", series, body)
	}
	wallet, gl := scrape(s.walletAPI), scrape(s.glAPI)
	for _, series := range []string{
		`walletgl_transfers_total{result="created",service="wallet"}`, `walletgl_batch_size_count{service="wallet"}`,
		`walletgl_relay_published_total{service="wallet"}`, `walletgl_relay_publish_seconds_count{service="wallet"}`,
		`walletgl_consumer_processed_total{event_type="TransferPosted.v2",service="wallet"}`,
		`walletgl_consumer_batch_seconds_count{service="wallet"}`, `walletgl_http_requests_total{code="2xx",method="POST",route="POST /v1/transfers",service="wallet"}`,
		`walletgl_db_pool_acquires_total{pool="main",service="wallet"}`, `go_goroutines`,
	} {
		moved(wallet, series)
	}
	for _, series := range []string{
		`walletgl_consumer_processed_total{event_type="TransferCompleted.v2",service="gl"}`,
		`walletgl_commit_to_posted_seconds_count{service="gl"}`, `walletgl_relay_published_total{service="gl"}`,
	} {
		moved(gl, series)
	}
	for _, name := range []string{"walletgl_outbox_rows", "walletgl_outbox_oldest_pending_seconds",
		"walletgl_outbox_oldest_unacknowledged_seconds", "walletgl_consumer_pending_messages"} {
		require.Contains(t, wallet, name)
		require.Contains(t, gl, name)
	}
}
