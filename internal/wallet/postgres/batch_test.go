package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// setupBatches returns a store with one batch worker, so that a test decides what shares a
// batch: it holds the worker (holdBatcher), queues requests, and lets go.
func setupBatches(t *testing.T) (*postgres.Store, *testBundle) {
	t.Helper()
	pool, dbURL := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{Batch: postgres.BatchConfig{Workers: 1}})
	runBatcher(t, store)
	return store, &testBundle{pool: pool, dbURL: dbURL}
}

type answer struct {
	transfer wallet.Transfer
	replayed bool
	err      error
}

// submit sends req from a goroutine of its own; the answer comes on the channel.
func submit(store *postgres.Store, req wallet.TransferRequest) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		tr, replayed, err := store.CreateTransfer(context.Background(), req)
		ch <- answer{tr, replayed, err}
	}()
	return ch
}

// submitInOrder queues the requests one after the other, each once the previous one is queued.
func submitInOrder(t *testing.T, store *postgres.Store, reqs ...wallet.TransferRequest) []<-chan answer {
	t.Helper()
	before := store.BatchStats().Queued
	out := make([]<-chan answer, len(reqs))
	for i, req := range reqs {
		out[i] = submit(store, req)
		waitQueued(t, store, before+i+1)
	}
	return out
}

func waitQueued(t *testing.T, store *postgres.Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return store.BatchStats().Queued == n },
		10*time.Second, time.Millisecond, "want %d queued requests", n)
}

// waitForLockWait returns once a statement of the sqlc query named waits for a lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, query string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- name: ' || $1 || ' %'`,
			query).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, time.Millisecond, "want a %s waiting for a lock", query)
}

// holdBatcher occupies the store's only batch worker: its batch waits for a wallet this test
// locked. Requests sent meanwhile queue up and form the next batch once release is called.
func holdBatcher(t *testing.T, store *postgres.Store, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	createWallet(t, store, "gate", "USD", false)
	if _, err := store.GetWallet(ctx, "mint-USD"); err != nil {
		createWallet(t, store, "mint-USD", "USD", true)
	}
	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback(ctx) })
	_, err = lock.Exec(ctx, "SELECT 1 FROM wallets WHERE id = 'gate' FOR UPDATE")
	require.NoError(t, err)
	held := submit(store, wallet.TransferRequest{
		IdempotencyKey: "gate", FromWalletID: "mint-USD", ToWalletID: "gate", Amount: 1, Currency: "USD",
	})
	waitForLockWait(t, pool, "LockWallets")
	return func() {
		t.Helper()
		require.NoError(t, lock.Commit(ctx))
		require.NoError(t, (<-held).err)
	}
}

func TestRefusedRequestsInABatchFailAlone(t *testing.T) {
	t.Parallel()
	store, bundle := setupBatches(t)
	balances := map[string]int64{}
	for i := range 10 {
		id := fmt.Sprintf("w%d", i)
		fund(t, store, id, "USD", 1000)
		balances[id] = 1000
	}
	fund(t, store, "eve", "EUR", 1000)
	transfersBefore, outboxBefore := count(t, bundle.pool, "transfers"), count(t, bundle.pool, "outbox")

	type request struct {
		req  wallet.TransferRequest
		want error
	}
	var reqs []request
	for i := range 50 {
		r := wallet.TransferRequest{
			IdempotencyKey: fmt.Sprintf("k-%d", i), FromWalletID: fmt.Sprintf("w%d", i%10),
			ToWalletID: fmt.Sprintf("w%d", (i+3)%10), Amount: int64(i + 1), Currency: "USD",
		}
		var want error
		switch i {
		case 7, 19, 33:
			r.Amount, want = 1_000_000, wallet.ErrInsufficientFunds
		case 11, 27:
			r.FromWalletID, want = "nobody", wallet.ErrWalletNotFound
		case 40:
			r.ToWalletID, want = "nobody", wallet.ErrWalletNotFound
		case 5:
			r.ToWalletID, want = "eve", wallet.ErrCurrencyMismatch
		case 44:
			r.Currency, want = "EUR", wallet.ErrCurrencyMismatch
		}
		reqs = append(reqs, request{r, want})
	}

	before := store.BatchStats()
	release := holdBatcher(t, store, bundle.pool)
	answers := make([]<-chan answer, len(reqs))
	for i, r := range reqs { // all at once: these requests do not depend on their order
		answers[i] = submit(store, r.req)
	}
	waitQueued(t, store, len(reqs))
	release()

	created := 0
	for i, r := range reqs {
		a := <-answers[i]
		if r.want != nil {
			require.ErrorIs(t, a.err, r.want, r.req.IdempotencyKey)
			continue
		}
		require.NoError(t, a.err, r.req.IdempotencyKey)
		require.False(t, a.replayed)
		require.Len(t, outboxRows(t, bundle.pool, a.transfer.ID.String()), 1)
		balances[r.req.FromWalletID] -= r.req.Amount
		balances[r.req.ToWalletID] += r.req.Amount
		created++
	}
	require.Equal(t, 42, created)
	for id, want := range balances {
		require.Equal(t, want, balance(t, store, id), id)
	}
	require.Equal(t, int64(1000), balance(t, store, "eve"))
	require.Equal(t, transfersBefore+created+1, count(t, bundle.pool, "transfers")) // +1: the gate's
	require.Equal(t, outboxBefore+created+1, count(t, bundle.pool, "outbox"))

	// The gate's batch, then one transaction for all fifty.
	after := store.BatchStats()
	require.Equal(t, int64(2), after.Batches-before.Batches)
	require.Equal(t, int64(51), after.Requests-before.Requests)
	require.Equal(t, int64(43), after.Created-before.Created)
	require.Zero(t, after.Fallbacks-before.Fallbacks)
	// Tried without the key lookup first, the refusals sent it back for the lookup: a refused
	// request might have been a replay.
	require.Equal(t, int64(1), after.Rewritten-before.Rewritten)
}

func TestABatchChecksRunningBalancesInOrder(t *testing.T) {
	t.Parallel()
	store, bundle := setupBatches(t)
	fund(t, store, "alice", "USD", 10)
	createWallet(t, store, "bob", "USD", false)
	req := func(key string, from, to string, amount int64) wallet.TransferRequest {
		return wallet.TransferRequest{IdempotencyKey: key, FromWalletID: from, ToWalletID: to, Amount: amount, Currency: "USD"}
	}

	release := holdBatcher(t, store, bundle.pool)
	answers := submitInOrder(t, store,
		req("a-1", "alice", "bob", 4),
		req("a-2", "alice", "bob", 4),
		req("a-3", "alice", "bob", 4), // 2 left: refused
		req("b-1", "bob", "alice", 8), // bob holds 8 after the first two
		req("a-4", "alice", "bob", 10),
		req("m-1", "mint-USD", "bob", 5), // a funding wallet goes below zero
	)
	release()

	want := []error{nil, nil, wallet.ErrInsufficientFunds, nil, nil, nil}
	for i, ch := range answers {
		a := <-ch
		if want[i] == nil {
			require.NoError(t, a.err, "request %d", i)
		} else {
			require.ErrorIs(t, a.err, want[i], "request %d", i)
		}
	}
	require.Equal(t, int64(0), balance(t, store, "alice"))
	require.Equal(t, int64(15), balance(t, store, "bob"))
}

func TestOneKeyTwiceInABatchMakesOneTransfer(t *testing.T) {
	t.Parallel()
	store, bundle := setupBatches(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)
	old := wallet.TransferRequest{IdempotencyKey: "old", FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD"}
	oldTransfer, _, err := store.CreateTransfer(ctx, old)
	require.NoError(t, err)
	transfersBefore := count(t, bundle.pool, "transfers")

	first := wallet.TransferRequest{IdempotencyKey: "k", FromWalletID: "alice", ToWalletID: "bob", Amount: 5, Currency: "USD"}
	other := first
	other.Amount = 6
	poor := wallet.TransferRequest{IdempotencyKey: "poor", FromWalletID: "alice", ToWalletID: "bob", Amount: 1_000_000, Currency: "USD"}
	poorThenFine := poor
	poorThenFine.Amount = 3
	oldOther := old
	oldOther.Amount = 2

	release := holdBatcher(t, store, bundle.pool)
	answers := submitInOrder(t, store, first, first, other, first, poor, poorThenFine, old, oldOther)
	release()
	got := make([]answer, len(answers))
	for i, ch := range answers {
		got[i] = <-ch
	}

	// The first request with key k creates the transfer; the same request again replays it and
	// another request with that key is refused.
	require.NoError(t, got[0].err)
	require.False(t, got[0].replayed)
	for _, i := range []int{1, 3} {
		require.NoError(t, got[i].err)
		require.True(t, got[i].replayed)
		require.Equal(t, got[0].transfer.ID, got[i].transfer.ID)
		require.Equal(t, got[0].transfer.EventID, got[i].transfer.EventID)
	}
	require.ErrorIs(t, got[2].err, wallet.ErrIdempotencyKeyReused)
	// A refused request keeps its key: the next request with it, another one, is refused.
	require.ErrorIs(t, got[4].err, wallet.ErrInsufficientFunds)
	require.ErrorIs(t, got[5].err, wallet.ErrIdempotencyKeyReused)
	// A key used before the batch: replay or refusal.
	require.NoError(t, got[6].err)
	require.True(t, got[6].replayed)
	require.Equal(t, oldTransfer.ID, got[6].transfer.ID)
	require.ErrorIs(t, got[7].err, wallet.ErrIdempotencyKeyReused)

	require.Equal(t, transfersBefore+2, count(t, bundle.pool, "transfers")) // k, gate
	require.Len(t, outboxRows(t, bundle.pool, got[0].transfer.ID.String()), 1)
	require.Equal(t, int64(1000-1-5), balance(t, store, "alice"))
	require.Equal(t, int64(1+5), balance(t, store, "bob"))
}

// A batch is first written without looking its keys up; a key another transaction commits
// meanwhile rolls it back, and the batch is written again with the lookup, which finds the key
// and answers its request as a replay.
func TestABatchWhoseKeyIsCommittedMeanwhileIsWrittenAgain(t *testing.T) {
	t.Parallel()
	store, bundle := setupBatches(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)
	race := wallet.TransferRequest{IdempotencyKey: "race", FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD"}
	template := race
	template.IdempotencyKey = "template"
	_, _, err := store.CreateTransfer(ctx, template)
	require.NoError(t, err)

	// Another transaction claims key "race" for the same request (same fingerprint) and has
	// not committed: the batch cannot see it when it looks the keys up.
	holder, err := bundle.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	var holderID string
	require.NoError(t, holder.QueryRow(ctx, `INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
		SELECT gen_random_uuid(), 'race', request_hash, from_wallet_id, to_wallet_id, amount, currency, gen_random_uuid()
		FROM transfers WHERE idempotency_key = 'template' RETURNING id::text`).Scan(&holderID))

	before := store.BatchStats()
	release := holdBatcher(t, store, bundle.pool)
	answers := submitInOrder(t, store,
		wallet.TransferRequest{IdempotencyKey: "before", FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD"},
		race,
		wallet.TransferRequest{IdempotencyKey: "after", FromWalletID: "bob", ToWalletID: "alice", Amount: 3, Currency: "USD"},
	)
	release()
	// The batch inserts its transfers and waits for the holder's key; the holder commits.
	waitForLockWait(t, bundle.pool, "InsertTransfers")
	require.NoError(t, holder.Commit(ctx))

	got := make([]answer, len(answers))
	for i, ch := range answers {
		got[i] = <-ch
	}
	require.NoError(t, got[0].err)
	require.False(t, got[0].replayed)
	require.NoError(t, got[1].err)
	require.True(t, got[1].replayed, "the key's transfer is the holder's")
	require.Equal(t, holderID, got[1].transfer.ID.String())
	require.NoError(t, got[2].err)
	require.False(t, got[2].replayed)

	after := store.BatchStats()
	require.Equal(t, int64(1), after.Rewritten-before.Rewritten)
	require.Zero(t, after.Fallbacks-before.Fallbacks)
	// The holder moved no money (it is a bare row); the batch's other requests did.
	require.Equal(t, int64(1000-1-10+3), balance(t, store, "alice"))
	require.Equal(t, int64(1+10-3), balance(t, store, "bob"))
	for _, i := range []int{0, 2} {
		require.Len(t, outboxRows(t, bundle.pool, got[i].transfer.ID.String()), 1)
	}
}

func TestStoppingTheBatcherAnswersQueuedRequests(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{Batch: postgres.BatchConfig{Workers: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- store.Run(ctx) }()
	require.Eventually(t, func() bool { return store.BatchStats().Running }, 10*time.Second, time.Millisecond)
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)

	release := holdBatcher(t, store, pool)
	var answers []<-chan answer
	for i := range 20 {
		answers = append(answers, submit(store, wallet.TransferRequest{
			IdempotencyKey: fmt.Sprintf("k-%d", i), FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
		}))
	}
	waitQueued(t, store, 20)
	cancel()
	require.Eventually(t, func() bool { return !store.BatchStats().Running }, 10*time.Second, time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("Run returned before answering its requests: %v", err)
	default:
	}
	release()
	for _, ch := range answers {
		require.NoError(t, (<-ch).err)
	}
	require.NoError(t, <-stopped)
	require.Equal(t, int64(980), balance(t, store, "alice"))

	// Once stopped, a request has a transaction of its own.
	batches := store.BatchStats().Batches
	_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "late", FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
	})
	require.NoError(t, err)
	require.Equal(t, batches, store.BatchStats().Batches)
	require.Equal(t, int64(979), balance(t, store, "alice"))
}

func TestConcurrentTransfersShareCommits(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	for i := range 20 {
		fund(t, store, fmt.Sprintf("w%d", i), "USD", 1000)
	}
	transfersBefore := count(t, bundle.pool, "transfers")
	before := store.BatchStats()

	const transfers = 200
	var wg sync.WaitGroup
	errs := make(chan error, transfers)
	for i := range transfers {
		wg.Go(func() {
			_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
				IdempotencyKey: fmt.Sprintf("k-%d", i), FromWalletID: fmt.Sprintf("w%d", i%20),
				ToWalletID: fmt.Sprintf("w%d", (i+7)%20), Amount: 1, Currency: "USD",
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	after := store.BatchStats()
	require.Equal(t, transfersBefore+transfers, count(t, bundle.pool, "transfers"))
	require.Equal(t, int64(transfers), after.Created-before.Created)
	require.Less(t, after.Batches-before.Batches, int64(transfers), "concurrent transfers share transactions")
	t.Logf("%d transfers in %d transactions", transfers, after.Batches-before.Batches)
	for i := range 20 {
		require.Equal(t, int64(1000), balance(t, store, fmt.Sprintf("w%d", i)))
	}
}

// On the optimistic path a replay looks like any new request; if the rules would refuse it
// now (the money it moved is gone), the batch goes back for the lookup and the request is
// answered as the replay it is.
func TestAReplayTheRulesWouldNowRefuseIsStillAReplay(t *testing.T) {
	t.Parallel()
	store, _ := setupBatches(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 10)
	createWallet(t, store, "bob", "USD", false)
	req := wallet.TransferRequest{IdempotencyKey: "all-of-it", FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD"}
	first, replayed, err := store.CreateTransfer(ctx, req)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Zero(t, balance(t, store, "alice"))

	before := store.BatchStats()
	again, replayed, err := store.CreateTransfer(ctx, req)
	require.NoError(t, err, "a replay is answered, not refused for insufficient funds")
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, int64(10), balance(t, store, "bob"))
	after := store.BatchStats()
	require.Equal(t, int64(1), after.Batches-before.Batches, "answered by the batcher")
	require.Equal(t, int64(1), after.Rewritten-before.Rewritten)
}
