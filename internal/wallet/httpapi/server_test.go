package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// document is the API's OpenAPI document, loaded once for every test's server.
var document = sync.OnceValues(func() (*openapitest.Document, error) { return openapitest.New(httpapi.OpenAPI()) })

// serve serves h for the test: every request the test sends and every answer it gets are
// checked against the OpenAPI document, and fail the test where they do not conform. A request
// sent on purpose to be refused is marked with openapitest.Invalid or Unchecked.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	doc, err := document()
	require.NoError(t, err)
	srv := httptest.NewServer(doc.Handler(t, h))
	t.Cleanup(srv.Close)
	return srv
}

type testBundle struct {
	url  string
	pool *pgxpool.Pool
	key  string // an API key with admin, sent by do unless the header sets Authorization
}

// setup serves the API over the real store on this test's own database, with alice holding
// 1000 USD, bob an empty USD wallet and eve an empty EUR wallet.
func setup(t *testing.T, health ...web.Check) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "wallet")
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	store := postgres.NewStore(pool, postgres.Options{Log: logger, Audit: httpapi.AuditByKey})
	// Transfers go through the batcher, as in the service; it stops after the server.
	runCtx, stopBatcher := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- store.Run(runCtx) }()
	t.Cleanup(func() {
		stopBatcher()
		require.NoError(t, <-stopped)
	})
	require.Eventually(t, func() bool { return store.BatchStats().Running }, 10*time.Second, time.Millisecond)
	keys, guard, key := authtest.Key(t, pool, auth.WalletScopes)
	srv := serve(t, httpapi.NewServer(logger, httpapi.Deps{
		Service: store, Admin: admin.New(pool), Guard: guard, Audit: keys, Health: health,
		Metrics: metrics.New("wallet"), MetricsOnAPI: true,
	}))
	b := &testBundle{url: srv.URL, pool: pool, key: key}

	for _, body := range []string{
		`{"id":"mint","currency":"USD","allow_negative":true}`,
		`{"id":"alice","currency":"USD"}`,
		`{"id":"bob","currency":"USD"}`,
		`{"id":"eve","currency":"EUR"}`,
	} {
		res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	res := b.transfer(t, "fund-alice", `{"from_wallet_id":"mint","to_wallet_id":"alice","amount":1000,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	return b
}

func (b *testBundle) do(t *testing.T, method, path string, header http.Header, body string) webtest.Response {
	t.Helper()
	if _, set := header["Authorization"]; !set { // an empty Authorization sends none
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", "Bearer "+b.key)
	}
	return webtest.Do(t, method, b.url+path, header, body)
}

func (b *testBundle) transfer(t *testing.T, key, body string) webtest.Response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/transfers", http.Header{"Idempotency-Key": {key}}, body)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	t.Run("a healthy service answers ok", func(t *testing.T) {
		t.Parallel()
		b := setup(t, web.Check{Name: "database", Func: func(context.Context) error { return nil }})
		res := b.do(t, http.MethodGet, "/healthz", nil, "")
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, "application/json", res.ContentType())
		require.JSONEq(t, `{"status":"ok"}`, res.Body)
	})
	t.Run("an unhealthy service answers 503 naming what is down, never its error", func(t *testing.T) {
		t.Parallel()
		b := setup(t,
			web.Check{Name: "database", Func: func(context.Context) error { return nil }},
			web.Check{Name: "nats", Func: func(context.Context) error { return errors.New("nats is CLOSED at 10.0.0.7") }})
		res := b.do(t, http.MethodGet, "/healthz", nil, "")
		res.RequireUnhealthy(t, map[string]string{"database": "ok", "nats": "unavailable"})
		require.NotContains(t, res.Body, "10.0.0.7")
		require.NotContains(t, res.Body, "CLOSED")
	})
}

func TestMetricsOnTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/metrics", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Contains(t, res.Body, `walletgl_http_requests_total{code="2xx",method="POST",route="POST /v1/wallets",service="wallet"} 4`)
	b.do(t, http.MethodGet, "/metrics", openapitest.Invalid(http.Header{"Authorization": {""}}, "no API key"), "").
		RequireProblem(t, http.StatusUnauthorized, "unauthenticated")
}

func TestWallets(t *testing.T) {
	t.Parallel()
	b := setup(t)

	res := b.do(t, http.MethodPost, "/v1/wallets", nil, `{"id":"carol","currency":"GBP","allow_negative":false}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Equal(t, "application/json", res.ContentType())
	require.JSONEq(t, `{"id":"carol","currency":"GBP","minor_units":2,"balance":0,"held":0,"available":0,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":1000,"held":0,"available":1000,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)

	// A wallet answer says how many minor units its currency has: none for the yen, three for
	// the Bahraini dinar.
	for code, minor := range map[string]int{"JPY": 0, "BHD": 3} {
		res = b.do(t, http.MethodPost, "/v1/wallets", nil, `{"id":"in-`+code+`","currency":"`+code+`"}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.JSONEq(t, fmt.Sprintf(`{"id":"in-%s","currency":"%s","minor_units":%d,"balance":0,"held":0,"available":0,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, code, code, minor), res.Body)
	}

	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		status  int
		slug    string
		invalid bool // the OpenAPI document refuses the request too
	}{
		{"an existing id is a conflict", "POST", "/v1/wallets", `{"id":"alice","currency":"USD"}`, 409, "wallet-exists", false},
		{"an id with a space is invalid", "POST", "/v1/wallets", `{"id":"a b","currency":"USD"}`, 400, "invalid-request", true},
		{"a lower-case currency is invalid", "POST", "/v1/wallets", `{"id":"x","currency":"usd"}`, 400, "invalid-currency", true},
		{"three letters that name no ISO 4217 currency are invalid", "POST", "/v1/wallets", `{"id":"x","currency":"ZZZ"}`, 400, "invalid-currency", false},
		{"a balance cannot be given", "POST", "/v1/wallets", `{"id":"x","currency":"USD","minor_units":2,"balance":5}`, 400, "invalid-request", true},
		{"malformed JSON is invalid", "POST", "/v1/wallets", `{"id":`, 400, "invalid-request", true},
		{"a JSON array is invalid", "POST", "/v1/wallets", `[]`, 400, "invalid-request", true},
		{"an empty body is invalid", "POST", "/v1/wallets", ``, 400, "invalid-request", true},
		{"an unknown wallet is not found", "GET", "/v1/wallets/nobody", ``, 404, "wallet-not-found", false},
		{"an unknown path is not found", "GET", "/v1/nothing", ``, 404, "not-found", true},
		{"the root is not found", "GET", "/", ``, 404, "not-found", true},
		{"a wrong method on an unknown path is not found", "POST", "/v1/nothing", `{"id":`, 404, "not-found", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header http.Header
			if tt.invalid {
				header = openapitest.Invalid(nil, tt.name)
			}
			b.do(t, tt.method, tt.path, header, tt.body).RequireProblem(t, tt.status, tt.slug)
		})
	}

	wrongMethods := []struct {
		name, method, path, allow string
	}{
		{"a wallet cannot be deleted", "DELETE", "/v1/wallets/alice", "GET, HEAD, PATCH"},
		{"the wallets cannot be replaced", "PUT", "/v1/wallets", "GET, HEAD, POST"},
		{"health cannot be posted", "POST", "/healthz", "GET, HEAD"},
		{"a transfer cannot be changed", "PUT", "/v1/transfers/0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70", "GET, HEAD"},
	}
	for _, tt := range wrongMethods {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(t, tt.method, tt.path, openapitest.Invalid(nil, tt.name), `{"id":`)
			res.RequireProblem(t, http.StatusMethodNotAllowed, "method-not-allowed")
			require.Equal(t, tt.allow, res.Header.Get("Allow"))
		})
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/v1/wallets/alice", http.Header{"X-Request-Id": {"client-7"}}, "")
	require.Equal(t, "client-7", res.Header.Get("X-Request-Id"), "a sane id is the client's")
	res = b.do(t, http.MethodGet, "/v1/nothing", openapitest.Invalid(http.Header{"X-Request-Id": {"client-8"}}, "no such route"), "")
	require.Equal(t, "client-8", res.Header.Get("X-Request-Id"), "also where no route is")
	res = b.do(t, http.MethodGet, "/v1/wallets/alice", openapitest.Invalid(http.Header{"X-Request-Id": {"a b"}}, "a space in the id"), "")
	res.RequireProblem(t, http.StatusBadRequest, "invalid-request-id")
	require.NotEqual(t, "a b", res.Header.Get("X-Request-Id"))
	require.NotEmpty(t, res.Header.Get("X-Request-Id"), "an insane id is replaced")
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
	b := setup(t)
	body := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":250,"currency":"USD"}`

	res := b.transfer(t, "order-1", body)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Equal(t, "application/json", res.ContentType())
	var created transferBody
	res.Decode(t, &created)
	require.NotEmpty(t, created.ID)
	require.Equal(t, transferBody{
		ID: created.ID, IdempotencyKey: "order-1", FromWalletID: "alice", ToWalletID: "bob",
		Amount: 250, Currency: "USD", Status: "completed", CreatedAt: created.CreatedAt,
	}, created)
	var fields map[string]any
	res.Decode(t, &fields)
	require.Len(t, fields, 9, "the creation answer has exactly the contract's fields: %s", res.Body)

	require.Empty(t, res.Header.Get("Idempotency-Replayed"), "a first answer is no replay")
	res = b.transfer(t, "order-1", body)
	require.Equal(t, http.StatusCreated, res.Status, "a replay answers the first request's status: %s", res.Body)
	require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
	var replayed transferBody
	res.Decode(t, &replayed)
	require.Equal(t, created, replayed)

	res = b.do(t, http.MethodGet, "/v1/transfers/"+created.ID, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var got transferBody
	res.Decode(t, &got)
	require.NotNil(t, got.OutboxStatus)
	require.Equal(t, "pending", *got.OutboxStatus)
	got.OutboxStatus = nil
	require.Equal(t, created, got)

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":750,"held":0,"available":750,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)

	res = b.transfer(t, "order-1", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":251,"currency":"USD"}`)
	res.RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
}

func TestCreateTransferRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	valid := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`
	tests := []struct {
		name    string
		header  http.Header
		body    string
		status  int
		slug    string
		invalid bool // the OpenAPI document refuses the request too
	}{
		{"a missing Idempotency-Key is invalid", http.Header{}, valid, 400, "invalid-request", true},
		{"a non-printable Idempotency-Key is invalid", http.Header{"Idempotency-Key": {"a\tb"}}, valid, 400, "invalid-request", true},
		{"an Idempotency-Key over 255 characters is invalid",
			http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, valid, 400, "invalid-request", true},
		{"malformed JSON is invalid", nil, `{"from_wallet_id":`, 400, "invalid-request", true},
		{"an unknown field is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","memo":"x"}`, 400, "invalid-request", true},
		{"a fractional amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1.5,"currency":"USD"}`, 400, "invalid-request", true},
		{"an amount in a string is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":"1","currency":"USD"}`, 400, "invalid-request", true},
		{"an amount beyond 64 bits is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":9223372036854775808,"currency":"USD"}`, 400, "invalid-request", true},
		{"a zero amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":0,"currency":"USD"}`, 400, "invalid-request", true},
		{"a negative amount is invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":-5,"currency":"USD"}`, 400, "invalid-request", true},
		{"three letters that name no ISO 4217 currency are invalid", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"ZZZ"}`, 400, "invalid-currency", false},
		{"trailing data is invalid", nil, valid + `{}`, 400, "invalid-request", true},
		{"an unknown source wallet is not found", nil,
			`{"from_wallet_id":"nobody","to_wallet_id":"bob","amount":1,"currency":"USD"}`, 404, "wallet-not-found", false},
		{"an unknown target wallet is not found", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"nobody","amount":1,"currency":"USD"}`, 404, "wallet-not-found", false},
		{"more than the balance is insufficient funds", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1001,"currency":"USD"}`, 422, "insufficient-funds", false},
		{"another currency is a mismatch", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"eve","amount":1,"currency":"USD"}`, 422, "currency-mismatch", false},
		{"the same wallet on both sides is refused", nil,
			`{"from_wallet_id":"alice","to_wallet_id":"alice","amount":1,"currency":"USD"}`, 422, "same-wallet", false},
		{"a body over 1 MiB is too large", nil,
			`{"from_wallet_id":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "body-too-large", true},
		{"trailing data beyond 1 MiB is too large", nil, valid + strings.Repeat(" ", 1<<20) + "x", 413, "body-too-large", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = http.Header{"Idempotency-Key": {fmt.Sprintf("refusal-%d", i)}}
			}
			if tt.invalid {
				header = openapitest.Invalid(header, tt.name)
			}
			b.do(t, http.MethodPost, "/v1/transfers", header, tt.body).RequireProblem(t, tt.status, tt.slug)
		})
	}
	res := b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":1000,"held":0,"available":1000,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
}

func TestGetTransferNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70", "not-a-uuid", "{0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70}"} {
		res := b.do(t, http.MethodGet, "/v1/transfers/"+url.PathEscape(id), nil, "")
		res.RequireProblem(t, http.StatusNotFound, "transfer-not-found")
	}
}

func TestListTransfers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 4 {
		res := b.transfer(t, fmt.Sprintf("k-%d", i), `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}

	type page struct {
		Transfers  []transferBody `json:"transfers"`
		NextCursor *string        `json:"next_cursor"`
	}
	var (
		all    []transferBody
		cursor string
	)
	for range 10 {
		res := b.do(t, http.MethodGet, "/v1/transfers?limit=2&after="+url.QueryEscape(cursor), nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var p page
		res.Decode(t, &p)
		require.NotNil(t, p.Transfers, "an empty page is an empty list, not null")
		all = append(all, p.Transfers...)
		if p.NextCursor == nil {
			require.Len(t, p.Transfers, 1, "next_cursor is null on the last page")
			break
		}
		require.NotEmpty(t, *p.NextCursor)
		cursor = *p.NextCursor
	}
	require.Len(t, all, 5) // the funding transfer and four more
	for _, tr := range all {
		require.NotNil(t, tr.OutboxStatus)
	}

	res := b.do(t, http.MethodGet, "/v1/transfers", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)

	invalid := openapitest.Invalid(nil, "a bad query string")
	b.do(t, http.MethodGet, "/v1/transfers?limit=0", invalid, "").RequireProblem(t, 400, "invalid-limit")
	b.do(t, http.MethodGet, "/v1/transfers?limit=x", invalid, "").RequireProblem(t, 400, "invalid-limit")
	b.do(t, http.MethodGet, "/v1/transfers?limit=5000", invalid, "").RequireProblem(t, 400, "invalid-limit")
	b.do(t, http.MethodGet, "/v1/transfers?after=%21%21", nil, "").RequireProblem(t, 400, "invalid-cursor")
	b.do(t, http.MethodGet, "/v1/transfers?limit=%zz", invalid, "").RequireProblem(t, 400, "invalid-query")
	b.do(t, http.MethodGet, "/v1/transfers?limit=1&limit=1000", invalid, "").RequireProblem(t, 400, "invalid-query")
}

func TestUnreachableDatabaseIs503(t *testing.T) {
	t.Parallel()
	// A pool on a port where nothing listens, with names that must not reach a client.
	pool, err := pgxpool.New(context.Background(), webtest.UnreachableDatabaseURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	keys := auth.NewKeys(pool, auth.WalletScopes) // unreachable too: the guard answers 503
	srv := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Service: postgres.NewStore(pool, postgres.Options{}), Admin: admin.New(pool),
		Guard: auth.NewGuard(keys, authtest.Unlimited, wallet.ErrUnavailable), Audit: keys, Health: []web.Check{{Name: "database", Func: pool.Ping}},
	}))
	b := &testBundle{url: srv.URL, pool: pool, key: "wgl_whatever"} // looked up in a database that is away

	for _, res := range []webtest.Response{
		b.do(t, http.MethodGet, "/v1/wallets/alice", nil, ""),
		b.transfer(t, "k", `{"from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"USD"}`),
		b.do(t, http.MethodGet, "/v1/admin/outbox", nil, ""),
	} {
		res.RequireProblem(t, http.StatusServiceUnavailable, "database-unavailable")
		res.RequireNoConnectionDetails(t)
	}

	b.do(t, http.MethodGet, "/healthz", nil, "").RequireUnhealthy(t, map[string]string{"database": "unavailable"})
}

func TestATransferRecordsTheKeyThatMadeIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.transfer(t, "by-key", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":5,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var madeBy, keyID string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		"SELECT created_by_key::text FROM transfers WHERE idempotency_key = 'by-key'").Scan(&madeBy))
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT id::text FROM api_keys WHERE name = 'test'").Scan(&keyID))
	require.Equal(t, keyID, madeBy)
}

// A request whose Idempotency-Key another request is still using is answered 409 at once, with
// Retry-After; once the first has finished, the key replays it.
func TestAKeyInFlightIsAnswered409WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	body := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":5,"currency":"USD"}`

	// Hold alice's row: the first request waits in its transaction for it.
	hold, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, "SELECT 1 FROM wallets WHERE id = 'alice' FOR UPDATE")
	require.NoError(t, err)
	first := make(chan webtest.Response, 1)
	go func() {
		first <- webtest.Do(t, http.MethodPost, b.url+"/v1/transfers", http.Header{"Idempotency-Key": {"busy"}, "Authorization": {"Bearer " + b.key}}, body)
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 20*time.Millisecond, "the first request waits for alice's row")

	res := b.transfer(t, "busy", body)
	res.RequireProblem(t, http.StatusConflict, "idempotency-key-in-flight")
	require.Equal(t, "1", res.Header.Get("Retry-After"))

	require.NoError(t, hold.Rollback(ctx))
	created := <-first
	require.Equal(t, http.StatusCreated, created.Status, created.Body)
	require.Empty(t, created.Header.Get("Idempotency-Replayed"))
	again := b.transfer(t, "busy", body)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))
	require.JSONEq(t, created.Body, again.Body)
}

func TestAReversalWithoutAnAmountReversesTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pay := func(key string, amount int64) string {
		t.Helper()
		res := b.transfer(t, key, fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":%d,"currency":"USD"}`, amount))
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		var tr transferBody
		res.Decode(t, &tr)
		return tr.ID
	}
	reverse := func(id, key, body string) webtest.Response {
		t.Helper()
		return b.do(t, http.MethodPost, "/v1/transfers/"+id+"/reversal", http.Header{"Idempotency-Key": {key}}, body)
	}
	amountOf := func(res webtest.Response) int64 {
		t.Helper()
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		var r struct {
			Amount int64 `json:"amount"`
		}
		res.Decode(t, &r)
		return r.Amount
	}

	whole := pay("pay-whole", 300)
	require.Equal(t, int64(300), amountOf(reverse(whole, "rest-whole", `{}`)), "no reversal yet: the whole amount")

	parts := pay("pay-parts", 400)
	require.Equal(t, int64(150), amountOf(reverse(parts, "part-1", `{"amount":150}`)))
	rest := reverse(parts, "rest-1", `{}`)
	require.Equal(t, int64(250), amountOf(rest), "the rest: what is not reversed yet")

	reverse(parts, "rest-2", `{}`).RequireProblem(t, http.StatusUnprocessableEntity, "transfer-fully-reversed")
	kept := reverse(parts, "rest-2", `{}`)
	kept.RequireProblem(t, http.StatusUnprocessableEntity, "transfer-fully-reversed")
	require.Equal(t, "true", kept.Header.Get("Idempotency-Replayed"), "the refusal is kept under its key")
	again := reverse(parts, "rest-1", `{}`)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"), "a replay of the rest answers the first reversal, though nothing is left")
	require.JSONEq(t, rest.Body, again.Body)
	reverse(parts, "rest-1", `{"amount":250}`).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")

	res := b.do(t, http.MethodGet, "/v1/transfers/"+parts, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var got struct {
		ReversedAmount int64 `json:"reversed_amount"`
	}
	res.Decode(t, &got)
	require.Equal(t, int64(400), got.ReversedAmount)
}

func TestReverseTransferInPartsWithReplayAndRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.transfer(t, "pay", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":400,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var tr transferBody
	res.Decode(t, &tr)
	reverse := func(id, key, body string) webtest.Response {
		t.Helper()
		return b.do(t, http.MethodPost, "/v1/transfers/"+id+"/reversal", http.Header{"Idempotency-Key": {key}}, body)
	}

	res = reverse(tr.ID, "undo-1", `{"amount":150}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Empty(t, res.Header.Get("Idempotency-Replayed"))
	var first struct {
		ID                 string `json:"id"`
		FromWalletID       string `json:"from_wallet_id"`
		ToWalletID         string `json:"to_wallet_id"`
		Amount             int64  `json:"amount"`
		ReversesTransferID string `json:"reverses_transfer_id"`
	}
	res.Decode(t, &first)
	require.Equal(t, tr.ID, first.ReversesTransferID)
	require.Equal(t, []string{"bob", "alice"}, []string{first.FromWalletID, first.ToWalletID})
	again := reverse(tr.ID, "undo-1", `{"amount":150}`)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))
	require.JSONEq(t, res.Body, again.Body, "a replay answers the first reversal")

	tests := []struct {
		name, id, key, body string
		status              int
		slug                string
		invalid             bool
	}{
		{"the same key with another amount is refused", tr.ID, "undo-1", `{"amount":151}`, 422, "idempotency-key-reused", false},
		{"more than what is left exceeds the transfer", tr.ID, "undo-2", `{"amount":251}`, 422, "reversal-exceeds-transfer", false},
		{"an unknown transfer is not found", "0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70", "undo-3", `{"amount":1}`, 404, "transfer-not-found", false},
		{"a reversal is not reversed", first.ID, "undo-4", `{"amount":1}`, 422, "transfer-is-reversal", false},
		{"a zero amount is invalid", tr.ID, "undo-5", `{"amount":0}`, 400, "invalid-request", true},
		{"an unknown field is invalid", tr.ID, "undo-6", `{"amount":1,"memo":"x"}`, 400, "invalid-request", true},
	}
	for _, tt := range tests {
		header := http.Header{"Idempotency-Key": {tt.key}}
		if tt.invalid {
			header = openapitest.Invalid(header, tt.name)
		}
		b.do(t, http.MethodPost, "/v1/transfers/"+tt.id+"/reversal", header, tt.body).RequireProblem(t, tt.status, tt.slug)
	}

	res = reverse(tr.ID, "undo-7", `{"amount":250}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res = b.do(t, http.MethodGet, "/v1/transfers/"+tr.ID, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var got struct {
		ReversedAmount int64 `json:"reversed_amount"`
		Reversals      []struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount"`
		} `json:"reversals"`
	}
	res.Decode(t, &got)
	require.Equal(t, int64(400), got.ReversedAmount)
	require.Len(t, got.Reversals, 2)
	require.Equal(t, first.ID, got.Reversals[0].ID)

	res = b.do(t, http.MethodGet, "/v1/transfers/"+tr.ID+"/reversals", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var list struct {
		Reversals []json.RawMessage `json:"reversals"`
	}
	res.Decode(t, &list)
	require.Len(t, list.Reversals, 2)
	b.do(t, http.MethodGet, "/v1/transfers/0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70/reversals", nil, "").RequireProblem(t, 404, "transfer-not-found")

	res = b.do(t, http.MethodGet, "/v1/wallets/bob", nil, "")
	require.JSONEq(t, `{"id":"bob","currency":"USD","minor_units":2,"balance":0,"held":0,"available":0,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
}
