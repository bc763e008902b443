package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

type testBundle struct {
	pool  *pgxpool.Pool
	dbURL string
}

// setup returns a store whose transfers go through the batcher, as they do in the service.
func setup(t *testing.T) (*postgres.Store, *testBundle) {
	t.Helper()
	pool, dbURL := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{})
	runBatcher(t, store)
	return store, &testBundle{pool: pool, dbURL: dbURL}
}

// runBatcher runs store's batcher until the test ends, and returns once it takes requests.
func runBatcher(t *testing.T, store *postgres.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return store.BatchStats().Running }, 10*time.Second, time.Millisecond)
}

func createWallet(t *testing.T, store *postgres.Store, id, currency string, allowNegative bool) {
	t.Helper()
	_, err := store.CreateWallet(context.Background(), wallet.Wallet{ID: id, Currency: currency, AllowNegative: allowNegative})
	require.NoError(t, err)
}

// fund creates wallet id holding amount, paid from a funding wallet that may go negative.
func fund(t *testing.T, store *postgres.Store, id, currency string, amount int64) {
	t.Helper()
	createWallet(t, store, id, currency, false)
	mint := "mint-" + currency
	if _, err := store.GetWallet(context.Background(), mint); err != nil {
		createWallet(t, store, mint, currency, true)
	}
	if amount == 0 {
		return
	}
	_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "fund-" + id, FromWalletID: mint, ToWalletID: id, Amount: amount, Currency: currency,
	})
	require.NoError(t, err)
}

func balance(t *testing.T, store *postgres.Store, id string) int64 {
	t.Helper()
	w, err := store.GetWallet(context.Background(), id)
	require.NoError(t, err)
	return w.Balance
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}

type outboxRow struct {
	ID          uuid.UUID
	EventType   string
	AggregateID string
	Payload     []byte
	Status      string
}

func outboxRows(t *testing.T, pool *pgxpool.Pool, aggregateID string) []outboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT id, event_type, aggregate_id, payload, status FROM outbox WHERE aggregate_id = $1", aggregateID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[outboxRow])
	require.NoError(t, err)
	return out
}

func TestCreateTransferWritesTransferBalancesAndOneEvent(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)

	tr, replayed, err := store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "k-1", FromWalletID: "alice", ToWalletID: "bob", Amount: 250, Currency: "USD",
	})
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, wallet.StatusCompleted, tr.Status)
	require.Equal(t, "pending", tr.OutboxStatus)
	require.Equal(t, uuid.Version(7), tr.ID.Version())
	require.Equal(t, uuid.Version(7), tr.EventID.Version())
	require.Equal(t, int64(750), balance(t, store, "alice"))
	require.Equal(t, int64(250), balance(t, store, "bob"))

	got, err := store.GetTransfer(ctx, tr.ID)
	require.NoError(t, err)
	require.Equal(t, tr, got)

	rows := outboxRows(t, bundle.pool, tr.ID.String())
	require.Len(t, rows, 1)
	row := rows[0]
	require.Equal(t, tr.EventID, row.ID)
	require.Equal(t, contract.TypeTransferCompletedV2, row.EventType, "v2 by default")
	require.Equal(t, "pending", row.Status)

	env, err := contract.DecodeEnvelope(row.Payload)
	require.NoError(t, err)
	require.Equal(t, "1.0", env.SpecVersion)
	require.Equal(t, tr.EventID.String(), env.ID)
	require.Equal(t, contract.SourceWallet, env.Source)
	require.Equal(t, contract.TypeTransferCompletedV2, env.Type)
	require.Equal(t, tr.ID.String(), env.Subject)
	require.Equal(t, "application/json", env.DataContentType)
	require.True(t, env.Time.Equal(tr.CreatedAt))

	var data contract.TransferCompleted
	require.NoError(t, env.DecodeData(&data))
	require.NoError(t, data.Validate())
	require.Equal(t, contract.TransferCompleted{
		TransferID: tr.ID.String(), FromWalletID: "alice", ToWalletID: "bob",
		Amount: 250, Currency: "USD", Kind: contract.KindTransfer, CreatedAt: data.CreatedAt,
	}, data)
	require.True(t, data.CreatedAt.Equal(tr.CreatedAt))

	// The data's field names are the contract the GL decodes (no reference: none was given).
	var raw map[string]any
	require.NoError(t, json.Unmarshal(env.Data, &raw))
	require.ElementsMatch(t, []string{"transfer_id", "from_wallet_id", "to_wallet_id", "amount", "currency", "kind", "created_at"},
		keys(raw))
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRefusedTransferLeavesNoTrace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  wallet.TransferRequest
		want error
	}{
		{"a transfer over the balance is insufficient funds",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "bob", Amount: 101, Currency: "USD"},
			wallet.ErrInsufficientFunds},
		{"a transfer in another currency than the source is a mismatch",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "EUR"},
			wallet.ErrCurrencyMismatch},
		{"a transfer to a wallet of another currency is a mismatch",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "eve", Amount: 1, Currency: "USD"},
			wallet.ErrCurrencyMismatch},
		{"an unknown source wallet is not found",
			wallet.TransferRequest{FromWalletID: "nobody", ToWalletID: "bob", Amount: 1, Currency: "USD"},
			wallet.ErrWalletNotFound},
		{"an unknown target wallet is not found",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "nobody", Amount: 1, Currency: "USD"},
			wallet.ErrWalletNotFound},
		{"a transfer to the same wallet is refused",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "alice", Amount: 1, Currency: "USD"},
			wallet.ErrSameWallet},
		{"a zero amount is invalid",
			wallet.TransferRequest{FromWalletID: "alice", ToWalletID: "bob", Amount: 0, Currency: "USD"},
			wallet.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, bundle := setup(t)
			fund(t, store, "alice", "USD", 100)
			createWallet(t, store, "bob", "USD", false)
			createWallet(t, store, "eve", "EUR", false)
			transfersBefore, outboxBefore := count(t, bundle.pool, "transfers"), count(t, bundle.pool, "outbox")

			tt.req.IdempotencyKey = "refused"
			_, _, err := store.CreateTransfer(context.Background(), tt.req)
			require.ErrorIs(t, err, tt.want)

			require.Equal(t, transfersBefore, count(t, bundle.pool, "transfers"))
			require.Equal(t, outboxBefore, count(t, bundle.pool, "outbox"))
			require.Equal(t, int64(100), balance(t, store, "alice"))
			require.Equal(t, int64(0), balance(t, store, "bob"))
			require.Equal(t, int64(0), balance(t, store, "eve"))
		})
	}
}

func TestRefusedTransferKeepsItsKey(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 10)
	createWallet(t, store, "bob", "USD", false)
	req := wallet.TransferRequest{IdempotencyKey: "k", FromWalletID: "alice", ToWalletID: "bob", Amount: 20, Currency: "USD"}

	_, _, err := store.CreateTransfer(ctx, req)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)

	// The refusal is kept under the key: the same request replays it even once the wallet is
	// funded, another request with the key is refused.
	_, _, err = store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "top-up", FromWalletID: "mint-USD", ToWalletID: "alice", Amount: 10, Currency: "USD",
	})
	require.NoError(t, err)
	_, _, err = store.CreateTransfer(ctx, req)
	var replayed *wallet.ReplayedRefusal
	require.ErrorAs(t, err, &replayed)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	req.Amount = 5
	_, _, err = store.CreateTransfer(ctx, req)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused)
}

func TestConcurrentRequestsWithOneKeyCreateOneTransfer(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)
	transfersBefore := count(t, bundle.pool, "transfers")
	outboxBefore := count(t, bundle.pool, "outbox")
	req := wallet.TransferRequest{IdempotencyKey: "same", FromWalletID: "alice", ToWalletID: "bob", Amount: 7, Currency: "USD"}

	const callers = 20
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		ids      = make([]uuid.UUID, callers)
		replays  = make([]bool, callers)
		failures = make([]error, callers)
	)
	for i := range callers {
		wg.Go(func() {
			<-start
			tr, replayed, err := store.CreateTransfer(context.Background(), req)
			ids[i], replays[i], failures[i] = tr.ID, replayed, err
		})
	}
	close(start)
	wg.Wait()

	created := 0
	for i := range callers {
		require.NoError(t, failures[i])
		require.Equal(t, ids[0], ids[i])
		if !replays[i] {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, transfersBefore+1, count(t, bundle.pool, "transfers"))
	require.Equal(t, outboxBefore+1, count(t, bundle.pool, "outbox"))
	require.Len(t, outboxRows(t, bundle.pool, ids[0].String()), 1)
	require.Equal(t, int64(993), balance(t, store, "alice"))
	require.Equal(t, int64(7), balance(t, store, "bob"))
}

func TestOneKeyWithAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)
	first := wallet.TransferRequest{IdempotencyKey: "k", FromWalletID: "alice", ToWalletID: "bob", Amount: 5, Currency: "USD"}
	tr, _, err := store.CreateTransfer(ctx, first)
	require.NoError(t, err)

	again, replayed, err := store.CreateTransfer(ctx, first)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, tr.ID, again.ID)
	require.Equal(t, tr.EventID, again.EventID)

	tests := []struct {
		name   string
		change func(r *wallet.TransferRequest)
	}{
		{"another amount", func(r *wallet.TransferRequest) { r.Amount = 6 }},
		{"another target", func(r *wallet.TransferRequest) { r.ToWalletID = "mint-USD" }},
		{"swapped wallets", func(r *wallet.TransferRequest) { r.FromWalletID, r.ToWalletID = r.ToWalletID, r.FromWalletID }},
		{"a missing wallet", func(r *wallet.TransferRequest) { r.ToWalletID = "nobody" }},
	}
	for _, tt := range tests {
		req := first
		tt.change(&req)
		_, _, err := store.CreateTransfer(ctx, req)
		require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused, tt.name)
	}
	require.Equal(t, int64(995), balance(t, store, "alice"))
}

func TestConcurrentTransfersLoseNoUpdate(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)

	var wg sync.WaitGroup
	errs := make(chan error, 101)
	for i := range 101 { // one more than alice holds: exactly one is refused
		wg.Go(func() {
			_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
				IdempotencyKey: fmt.Sprintf("k-%d", i), FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if err != nil {
			require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
			refused++
		}
	}
	require.Equal(t, 1, refused)
	require.Equal(t, int64(0), balance(t, store, "alice"))
	require.Equal(t, int64(100), balance(t, store, "bob"))
}

func TestOppositeTransfersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "a", "USD", 1000)
	fund(t, store, "b", "USD", 1000)

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 50 {
		for _, dir := range [][2]string{{"a", "b"}, {"b", "a"}} {
			wg.Go(func() {
				_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
					IdempotencyKey: fmt.Sprintf("%s-%s-%d", dir[0], dir[1], i),
					FromWalletID:   dir[0], ToWalletID: dir[1], Amount: int64(i + 1), Currency: "USD",
				})
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(1000), balance(t, store, "a"))
	require.Equal(t, int64(1000), balance(t, store, "b"))

	// WithTx would hide deadlocks by retrying; the database counts them.
	var deadlocks int64
	require.NoError(t, bundle.pool.QueryRow(context.Background(),
		"SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&deadlocks))
	require.Zero(t, deadlocks)
}

func TestClaimWaitingPastLockTimeoutIsInFlight(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 10)
	createWallet(t, store, "bob", "USD", false)

	// Another request holds the key: its transaction claimed it and has not finished.
	holder, err := bundle.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
		VALUES ($1, 'busy', '\x00', 'alice', 'bob', 1, 'USD', $2)`, uuid.New(), uuid.New())
	require.NoError(t, err)

	cfg, err := pgxpool.ParseConfig(bundle.dbURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "200ms"
	impatient, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(impatient.Close)

	// Through the batcher: the batch's insert times out, and the request run alone reports it.
	impatientStore := postgres.NewStore(impatient, postgres.Options{})
	runBatcher(t, impatientStore)
	_, _, err = impatientStore.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "busy", FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
	})
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyInFlight)
}

func TestHandleTransferPostedAcknowledgesTheEvent(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)
	tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "k", FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
	})
	require.NoError(t, err)
	other, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "other", FromWalletID: "alice", ToWalletID: "bob", Amount: 2, Currency: "USD",
	})
	require.NoError(t, err)

	handler := postgres.NewAcknowledgments()
	handle := func(env contract.Envelope) error {
		return database.WithTx(ctx, bundle.pool, func(tx pgx.Tx) error { return handler.Handle(ctx, tx, []contract.Envelope{env}) })
	}
	env := postedEnvelope(t, contract.TransferPosted{
		TransferID: tr.ID.String(), SourceEventID: tr.EventID.String(), EntryID: "entry-1", PostedAt: time.Now(),
	})

	require.NoError(t, handle(env))
	got, err := store.GetTransfer(ctx, tr.ID)
	require.NoError(t, err)
	require.Equal(t, "acknowledged", got.OutboxStatus)
	var acknowledgedAt time.Time
	require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT acknowledged_at FROM outbox WHERE id = $1", tr.EventID).Scan(&acknowledgedAt))

	// Delivered again: nothing moves and nothing fails.
	require.NoError(t, handle(env))
	var again time.Time
	require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT acknowledged_at FROM outbox WHERE id = $1", tr.EventID).Scan(&again))
	require.True(t, again.Equal(acknowledgedAt))

	untouched, err := store.GetTransfer(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, "pending", untouched.OutboxStatus)
}

func TestHandleTransferPostedRefusesMalformedEvents(t *testing.T) {
	t.Parallel()
	_, bundle := setup(t)
	ctx := context.Background()
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"a source event id that is not a uuid",
			postedEnvelope(t, contract.TransferPosted{TransferID: "t", SourceEventID: "not-a-uuid"})},
		{"an empty source event id",
			postedEnvelope(t, contract.TransferPosted{TransferID: "t"})},
		{"data that does not decode",
			contract.Envelope{SpecVersion: "1.0", ID: "x", Type: contract.TypeTransferPosted, Data: json.RawMessage(`[1]`)}},
		{"another event type",
			contract.Envelope{SpecVersion: "1.0", ID: "x", Type: contract.TypeTransferCompleted, Data: json.RawMessage(`{}`)}},
		{"a v2 without postings",
			contract.Envelope{SpecVersion: "1.0", ID: "x", Type: contract.TypeTransferPostedV2, Data: json.RawMessage(`{"postings":[]}`)}},
		{"a v2 with one bad posting among good ones",
			postingsEnvelope(t, contract.TransferPosted{TransferID: "t", SourceEventID: uuid.NewString()}, contract.TransferPosted{TransferID: "t"})},
		{"a v2 whose data is a v1's",
			contract.Envelope{SpecVersion: "1.0", ID: "x", Type: contract.TypeTransferPostedV2, Data: json.RawMessage(`{"transfer_id":"t","source_event_id":"s"}`)}},
	}
	acks := postgres.NewAcknowledgments()
	for _, tt := range tests {
		err := database.WithTx(ctx, bundle.pool, func(tx pgx.Tx) error { return acks.Handle(ctx, tx, []contract.Envelope{tt.env}) })
		require.ErrorIs(t, err, contract.ErrMalformed, tt.name)
	}
}

func postedEnvelope(t *testing.T, posted contract.TransferPosted) contract.Envelope {
	t.Helper()
	data, err := json.Marshal(posted)
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.NewString(), Source: contract.SourceGL, Type: contract.TypeTransferPosted,
		Subject: posted.TransferID, Time: time.Now().UTC(), DataContentType: "application/json", Data: data,
	}
}

func postingsEnvelope(t *testing.T, postings ...contract.TransferPosted) contract.Envelope {
	t.Helper()
	data, err := json.Marshal(contract.TransferPostings{Postings: postings})
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.NewString(), Source: contract.SourceGL, Type: contract.TypeTransferPostedV2,
		Subject: postings[0].TransferID, Time: time.Now().UTC(), DataContentType: "application/json", Data: data,
	}
}

// One TransferPosted.v2 acknowledges every transfer it names; a v1 from a GL not yet upgraded
// still acknowledges its one, in the same batch.
func TestOneAcknowledgmentOfABatchAcknowledgesEveryTransferItNames(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)
	var postings []contract.TransferPosted
	for i := range 4 {
		tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
			IdempotencyKey: fmt.Sprintf("v2-%d", i), FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
		})
		require.NoError(t, err)
		postings = append(postings, contract.TransferPosted{TransferID: tr.ID.String(), SourceEventID: tr.EventID.String(), EntryID: "e", PostedAt: time.Now()})
	}
	envs := []contract.Envelope{postingsEnvelope(t, postings[:3]...), postedEnvelope(t, postings[3])}
	handler := postgres.NewAcknowledgments()
	require.NoError(t, database.WithTx(ctx, bundle.pool, func(tx pgx.Tx) error { return handler.Handle(ctx, tx, envs) }))
	for _, p := range postings {
		var status string
		require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT status FROM outbox WHERE id = $1", p.SourceEventID).Scan(&status))
		require.Equal(t, "acknowledged", status, p.TransferID)
	}
}

func TestWallets(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()

	w, err := store.CreateWallet(ctx, wallet.Wallet{ID: "alice_1-x", Currency: "USD", Balance: 99})
	require.NoError(t, err)
	require.Equal(t, "alice_1-x", w.ID)
	require.Zero(t, w.Balance, "a new wallet starts empty whatever the caller says")
	require.False(t, w.CreatedAt.IsZero())

	got, err := store.GetWallet(ctx, "alice_1-x")
	require.NoError(t, err)
	require.Equal(t, w, got)

	_, err = store.CreateWallet(ctx, wallet.Wallet{ID: "alice_1-x", Currency: "EUR"})
	require.ErrorIs(t, err, wallet.ErrWalletExists)
	_, err = store.GetWallet(ctx, "nobody")
	require.ErrorIs(t, err, wallet.ErrWalletNotFound)
	_, err = store.GetTransfer(ctx, uuid.New())
	require.ErrorIs(t, err, wallet.ErrTransferNotFound)

	for _, invalid := range []wallet.Wallet{
		{ID: "", Currency: "USD"},
		{ID: "has space", Currency: "USD"},
		{ID: string(make([]byte, 65)), Currency: "USD"},
	} {
		_, err := store.CreateWallet(ctx, invalid)
		require.ErrorIs(t, err, wallet.ErrInvalid, "%+v", invalid)
	}
	for _, code := range []string{"usd", "USDT", "ZZZ"} {
		_, err := store.CreateWallet(ctx, wallet.Wallet{ID: "ok", Currency: code})
		require.ErrorIs(t, err, wallet.ErrInvalidCurrency, "currency %q", code)
	}
}

func TestListTransfersPagesInOrder(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)
	for i := range 6 {
		_, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
			IdempotencyKey: fmt.Sprintf("k-%d", i), FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
		})
		require.NoError(t, err)
	}

	var (
		seen   []wallet.Transfer
		cursor wallet.Cursor
	)
	for range 10 {
		page, err := store.ListTransfers(ctx, wallet.TransferQuery{After: cursor, Limit: 3})
		require.NoError(t, err)
		seen = append(seen, page.Transfers...)
		if page.Next.IsZero() {
			require.Len(t, page.Transfers, 1, "the last page holds what is left")
			break
		}
		parsed, err := wallet.ParseCursor(page.Next.String())
		require.NoError(t, err)
		require.Equal(t, page.Next, parsed, "the cursor survives its encoding")
		cursor = parsed
	}
	require.Len(t, seen, 7) // the funding transfer and six more
	for i := 1; i < len(seen); i++ {
		prev, cur := seen[i-1], seen[i]
		require.True(t, prev.CreatedAt.Before(cur.CreatedAt) ||
			(prev.CreatedAt.Equal(cur.CreatedAt) && prev.ID.String() < cur.ID.String()))
		require.Equal(t, "pending", cur.OutboxStatus)
	}
}

func TestBalanceTotalsStayZeroPerCurrency(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	fund(t, store, "alice", "USD", 100)
	fund(t, store, "bob", "USD", 50)
	fund(t, store, "eve", "EUR", 70)

	totals, err := store.BalanceTotals(context.Background())
	require.NoError(t, err)
	require.Equal(t, []wallet.CurrencyTotal{
		{Currency: "EUR", Total: 0, Wallets: 2},
		{Currency: "USD", Total: 0, Wallets: 3},
	}, totals)
}

func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens, the connection is refused at once.
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/wallet?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool, postgres.Options{})
	runBatcher(t, store)

	_, err = store.GetWallet(context.Background(), "alice")
	require.ErrorIs(t, err, wallet.ErrUnavailable)
	_, _, err = store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "k", FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "USD",
	})
	require.ErrorIs(t, err, wallet.ErrUnavailable)
}

func TestAcknowledgmentsTakeAWholeBatchAndABadOneFailsIt(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)
	var envs []contract.Envelope
	for i := range 5 {
		tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
			IdempotencyKey: fmt.Sprintf("b%d", i), FromWalletID: "alice", ToWalletID: "bob", Amount: 1, Currency: "USD",
		})
		require.NoError(t, err)
		envs = append(envs, postedEnvelope(t, contract.TransferPosted{
			TransferID: tr.ID.String(), SourceEventID: tr.EventID.String(), EntryID: "e", PostedAt: time.Now(),
		}))
	}
	handler := postgres.NewAcknowledgments()
	batch := func(envs []contract.Envelope) error {
		return database.WithTx(ctx, bundle.pool, func(tx pgx.Tx) error { return handler.Handle(ctx, tx, envs) })
	}
	acknowledged := func() int {
		var n int
		require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status = 'acknowledged'").Scan(&n))
		return n
	}

	bad := postedEnvelope(t, contract.TransferPosted{TransferID: "t", SourceEventID: "not-a-uuid"})
	err := batch(append(append([]contract.Envelope{}, envs[:2]...), bad))
	require.ErrorIs(t, err, contract.ErrMalformed)
	require.Zero(t, acknowledged(), "a batch with a bad event acknowledges nothing")

	require.NoError(t, batch(envs))
	require.Equal(t, 5, acknowledged())
}
