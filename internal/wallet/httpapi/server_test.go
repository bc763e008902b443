package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/problem"
	"walletgl/internal/testenv"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
)

type testBundle struct {
	url  string
	pool *pgxpool.Pool
}

// setup serves the API over the real store on this test's own database, with alice holding
// 1000 USD, bob an empty USD wallet and eve an empty EUR wallet.
func setup(t *testing.T, health func(ctx context.Context) error) *testBundle {
	t.Helper()
	pool, _ := testenv.MigratedPool(t, "wallet")
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	store := postgres.NewStore(pool, postgres.Options{Log: logger})
	// Transfers go through the batcher, as in the service; it stops after the server.
	runCtx, stopBatcher := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- store.Run(runCtx) }()
	t.Cleanup(func() {
		stopBatcher()
		require.NoError(t, <-stopped)
	})
	require.Eventually(t, func() bool { return store.BatchStats().Running }, 10*time.Second, time.Millisecond)
	srv := httptest.NewServer(httpapi.NewServer(logger, store, events.NewAdmin(pool), health))
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, pool: pool}

	for _, body := range []string{
		`{"id":"mint","currency":"USD","allow_negative":true}`,
		`{"id":"alice","currency":"USD"}`,
		`{"id":"bob","currency":"USD"}`,
		`{"id":"eve","currency":"EUR"}`,
	} {
		res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
		require.Equal(t, http.StatusCreated, res.status, res.body)
	}
	res := b.transfer(t, "fund-alice", `{"from_wallet_id":"mint","to_wallet_id":"alice","amount":1000,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	return b
}

type response struct {
	status      int
	contentType string
	body        string
}

func (b *testBundle) do(t *testing.T, method, path string, header http.Header, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), body: string(data)}
}

func (b *testBundle) transfer(t *testing.T, key, body string) response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/transfers", http.Header{"Idempotency-Key": {key}}, body)
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(r.body), v), r.body)
}

// requireProblem checks that r is a problem+json document with this status and slug.
func requireProblem(t *testing.T, r response, status int, slug string) {
	t.Helper()
	require.Equal(t, status, r.status, r.body)
	require.Equal(t, "application/problem+json", r.contentType)
	var p problem.Details
	r.decode(t, &p)
	require.Equal(t, problem.TypeBase+slug, p.Type, r.body)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Detail)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	t.Run("a healthy service answers ok", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(context.Context) error { return nil })
		res := b.do(t, http.MethodGet, "/healthz", nil, "")
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, "application/json", res.contentType)
		require.JSONEq(t, `{"status":"ok"}`, res.body)
	})
	t.Run("an unhealthy service answers 503 with the reason", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(context.Context) error { return errors.New("relay is not running") })
		res := b.do(t, http.MethodGet, "/healthz", nil, "")
		requireProblem(t, res, http.StatusServiceUnavailable, "unavailable")
		var p problem.Details
		res.decode(t, &p)
		require.Equal(t, "relay is not running", p.Detail)
	})
}

func TestWallets(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	res := b.do(t, http.MethodPost, "/v1/wallets", nil, `{"id":"carol","currency":"GBP","allow_negative":false}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.Equal(t, "application/json", res.contentType)
	require.JSONEq(t, `{"id":"carol","currency":"GBP","balance":0,"allow_negative":false}`, res.body)

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.JSONEq(t, `{"id":"alice","currency":"USD","balance":1000,"allow_negative":false}`, res.body)

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		slug   string
	}{
		{"an existing id is a conflict", "POST", "/v1/wallets", `{"id":"alice","currency":"USD"}`, 409, "wallet-exists"},
		{"an id with a space is invalid", "POST", "/v1/wallets", `{"id":"a b","currency":"USD"}`, 400, "invalid-request"},
		{"a lower-case currency is invalid", "POST", "/v1/wallets", `{"id":"x","currency":"usd"}`, 400, "invalid-request"},
		{"a balance cannot be given", "POST", "/v1/wallets", `{"id":"x","currency":"USD","balance":5}`, 400, "invalid-request"},
		{"malformed JSON is invalid", "POST", "/v1/wallets", `{"id":`, 400, "invalid-request"},
		{"an empty body is invalid", "POST", "/v1/wallets", ``, 400, "invalid-request"},
		{"an unknown wallet is not found", "GET", "/v1/wallets/nobody", ``, 404, "wallet-not-found"},
		{"an unknown path is not found", "GET", "/v1/nothing", ``, 404, "not-found"},
		{"a wrong method is not allowed", "DELETE", "/v1/wallets/alice", ``, 405, "method-not-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireProblem(t, b.do(t, tt.method, tt.path, nil, tt.body), tt.status, tt.slug)
		})
	}
}

type transferBody struct {
	ID             string  `json:"id"`
	IdempotencyKey string  `json:"idempotency_key"`
	FromWalletID   string  `json:"from_wallet_id"`
	ToWalletID     string  `json:"to_wallet_id"`
	Amount         int64   `json:"amount"`
	Currency       string  `json:"currency"`
	Status         string  `json:"status"`
	CreatedAt      string  `json:"created_at"`
	OutboxStatus   *string `json:"outbox_status"`
}

func TestCreateTransferAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	body := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":250,"currency":"USD"}`

	res := b.transfer(t, "order-1", body)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.Equal(t, "application/json", res.contentType)
	var created transferBody
	res.decode(t, &created)
	require.NotEmpty(t, created.ID)
	require.Equal(t, transferBody{
		ID: created.ID, IdempotencyKey: "order-1", FromWalletID: "alice", ToWalletID: "bob",
		Amount: 250, Currency: "USD", Status: "completed", CreatedAt: created.CreatedAt,
	}, created)
	var fields map[string]any
	res.decode(t, &fields)
	require.Len(t, fields, 8, "the creation answer has exactly the contract's fields: %s", res.body)

	res = b.transfer(t, "order-1", body)
	require.Equal(t, http.StatusOK, res.status, res.body)
	var replayed transferBody
	res.decode(t, &replayed)
	require.Equal(t, created, replayed)

	res = b.do(t, http.MethodGet, "/v1/transfers/"+created.ID, nil, "")
	require.Equal(t, http.StatusOK, res.status, res.body)
	var got transferBody
	res.decode(t, &got)
	require.NotNil(t, got.OutboxStatus)
	require.Equal(t, "pending", *got.OutboxStatus)
	got.OutboxStatus = nil
	require.Equal(t, created, got)

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","balance":750,"allow_negative":false}`, res.body)

	requireProblem(t, b.transfer(t, "order-1", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":251,"currency":"USD"}`),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
}

func TestCreateTransferRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	valid := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`
	tests := []struct {
		name   string
		header http.Header
		body   string
		status int
		slug   string
	}{
		{"a missing Idempotency-Key is invalid", http.Header{}, valid, 400, "invalid-request"},
		{"a non-printable Idempotency-Key is invalid", http.Header{"Idempotency-Key": {"a\tb"}}, valid, 400, "invalid-request"},
		{"an Idempotency-Key over 255 characters is invalid",
			http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, valid, 400, "invalid-request"},
		{"malformed JSON is invalid", nil, `{"from_wallet_id":`, 400, "invalid-request"},
		{"an unknown field is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","memo":"x"}`, 400, "invalid-request"},
		{"a fractional amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1.5,"currency":"USD"}`, 400, "invalid-request"},
		{"an amount in a string is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":"1","currency":"USD"}`, 400, "invalid-request"},
		{"an amount beyond 64 bits is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":9223372036854775808,"currency":"USD"}`, 400, "invalid-request"},
		{"a zero amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":0,"currency":"USD"}`, 400, "invalid-request"},
		{"a negative amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":-5,"currency":"USD"}`, 400, "invalid-request"},
		{"trailing data is invalid", nil, valid + `{}`, 400, "invalid-request"},
		{"an unknown source wallet is not found", nil,
			`{"from_wallet_id":"nobody","to_wallet_id":"bob","amount":1,"currency":"USD"}`, 404, "wallet-not-found"},
		{"an unknown target wallet is not found", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"nobody","amount":1,"currency":"USD"}`, 404, "wallet-not-found"},
		{"more than the balance is insufficient funds", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1001,"currency":"USD"}`, 422, "insufficient-funds"},
		{"another currency is a mismatch", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"eve","amount":1,"currency":"USD"}`, 422, "currency-mismatch"},
		{"the same wallet on both sides is refused", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"alice","amount":1,"currency":"USD"}`, 422, "same-wallet"},
		{"a body over 1 MiB is too large", nil,
			`{"from_wallet_id":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "body-too-large"},
		{"trailing data beyond 1 MiB is too large", nil, valid + strings.Repeat(" ", 1<<20) + "x", 413, "body-too-large"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = http.Header{"Idempotency-Key": {fmt.Sprintf("refusal-%d", i)}}
			}
			requireProblem(t, b.do(t, http.MethodPost, "/v1/transfers", header, tt.body), tt.status, tt.slug)
		})
	}
	res := b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","balance":1000,"allow_negative":false}`, res.body)
}

func TestGetTransferNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, id := range []string{"0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70", "not-a-uuid", "{0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70}"} {
		requireProblem(t, b.do(t, http.MethodGet, "/v1/transfers/"+url.PathEscape(id), nil, ""),
			http.StatusNotFound, "transfer-not-found")
	}
}

func TestListTransfers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i := range 4 {
		res := b.transfer(t, fmt.Sprintf("k-%d", i), `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`)
		require.Equal(t, http.StatusCreated, res.status, res.body)
	}

	type page struct {
		Transfers  []transferBody `json:"transfers"`
		NextCursor string         `json:"next_cursor"`
	}
	var (
		all    []transferBody
		cursor string
	)
	for range 10 {
		res := b.do(t, http.MethodGet, "/v1/transfers?limit=2&after="+url.QueryEscape(cursor), nil, "")
		require.Equal(t, http.StatusOK, res.status, res.body)
		var p page
		res.decode(t, &p)
		require.NotNil(t, p.Transfers, "an empty page is an empty list, not null")
		all = append(all, p.Transfers...)
		if len(p.Transfers) == 0 {
			require.Equal(t, cursor, p.NextCursor)
			break
		}
		require.NotEmpty(t, p.NextCursor)
		cursor = p.NextCursor
	}
	require.Len(t, all, 5) // the funding transfer and four more
	for _, tr := range all {
		require.NotNil(t, tr.OutboxStatus)
	}

	res := b.do(t, http.MethodGet, "/v1/transfers", nil, "")
	require.Equal(t, http.StatusOK, res.status, res.body)

	requireProblem(t, b.do(t, http.MethodGet, "/v1/transfers?limit=0", nil, ""), 400, "invalid-request")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/transfers?limit=x", nil, ""), 400, "invalid-request")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/transfers?after=%21%21", nil, ""), 400, "invalid-request")
	res = b.do(t, http.MethodGet, "/v1/transfers?limit=5000", nil, "")
	require.Equal(t, http.StatusOK, res.status, "a limit over the maximum is capped: %s", res.body)
}

func TestUnreachableDatabaseIs503(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/wallet?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	srv := httptest.NewServer(httpapi.NewServer(zerolog.Nop(), postgres.NewStore(pool, postgres.Options{}), events.NewAdmin(pool), nil))
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, pool: pool}

	requireProblem(t, b.do(t, http.MethodGet, "/v1/wallets/alice", nil, ""), http.StatusServiceUnavailable, "database-unavailable")
	requireProblem(t, b.transfer(t, "k", `{"from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"USD"}`),
		http.StatusServiceUnavailable, "database-unavailable")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/admin/outbox", nil, ""), http.StatusServiceUnavailable, "database-unavailable")
}
