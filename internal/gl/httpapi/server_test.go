package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metrics"
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
	server := httptest.NewServer(checked(t, h))
	t.Cleanup(server.Close)
	return server
}

// checked is h with every exchange checked against the OpenAPI document.
func checked(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	doc, err := document()
	require.NoError(t, err)
	return doc.Handler(t, h)
}

type testBundle struct {
	ledger *postgres.Ledger
	server *httptest.Server
	key    string     // an API key with admin
	keys   *auth.Keys // the keys and the audit trail of the ledger's database
	guard  *auth.Guard
	pool   *pgxpool.Pool
}

// setup serves the API over a real, migrated ledger holding the given entries.
func setup(t *testing.T, entries ...gl.Entry) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "gl")
	ledger := postgres.NewLedger(pool)
	for _, e := range entries {
		err := database.WithTx(context.Background(), pool, func(tx pgx.Tx) error {
			_, err := ledger.Post(context.Background(), tx, e)
			return err
		})
		require.NoError(t, err)
	}
	keys, guard, key := authtest.Key(t, pool, auth.GLScopes)
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Ledger: ledger, Adjustments: ledger.WithAudit(httpapi.AuditByKey), Guard: guard,
		Health:  []web.Check{{Name: "database", Func: ledger.Ping}},
		Metrics: metrics.New("gl"), MetricsOnAPI: true,
	}))
	return &testBundle{ledger: ledger, server: server, key: key, keys: keys, guard: guard, pool: pool}
}

func entry(transferID, currency string, amount int64) gl.Entry {
	return gl.Entry{
		ID: uuid.Must(uuid.NewV7()), EventID: uuid.Must(uuid.NewV7()).String(), TransferID: transferID,
		Currency: currency, OccurredAt: time.Now().UTC(),
		Lines: []gl.Line{
			{AccountCode: "1010", Direction: gl.Debit, Amount: amount, WalletID: "w-from"},
			{AccountCode: "2010", Direction: gl.Credit, Amount: amount, WalletID: "w-to"},
		},
	}
}

// get requests path with the bundle's key and decodes the body into v, returning the status
// and content type.
func (b *testBundle) get(t *testing.T, path string, v any) (int, string) {
	t.Helper()
	res := webtest.Do(t, http.MethodGet, b.server.URL+path, authtest.Bearer(b.key), "")
	require.NoError(t, json.Unmarshal([]byte(res.Body), v))
	return res.Status, res.ContentType()
}

// requireProblem asserts that path answers with the problem named by slug.
func (b *testBundle) requireProblem(t *testing.T, path string, status int, slug string) web.Problem {
	t.Helper()
	return webtest.Do(t, http.MethodGet, b.server.URL+path, authtest.Bearer(b.key), "").RequireProblem(t, status, slug)
}

// requireInvalid is requireProblem for a request the OpenAPI document refuses too.
func (b *testBundle) requireInvalid(t *testing.T, path string, status int, slug string) web.Problem {
	t.Helper()
	header := openapitest.Invalid(authtest.Bearer(b.key), t.Name())
	return webtest.Do(t, http.MethodGet, b.server.URL+path, header, "").RequireProblem(t, status, slug)
}

func TestHealthz(t *testing.T) {
	t.Parallel()

	t.Run("a reachable database is healthy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var body map[string]string
		status, contentType := b.get(t, "/healthz", &body)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "application/json", contentType)
		require.Equal(t, map[string]string{"status": "ok"}, body)
	})

	t.Run("a failing check answers 503 naming what is down, never its error", func(t *testing.T) {
		t.Parallel()
		server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{Health: []web.Check{
			{Name: "database", Func: func(context.Context) error { return errors.New("database is on fire at 10.0.0.7") }},
			{Name: "nats", Func: func(context.Context) error { return nil }},
		}}))
		res := webtest.Do(t, http.MethodGet, server.URL+"/healthz", nil, "")
		res.RequireUnhealthy(t, map[string]string{"database": "unavailable", "nats": "ok"})
		require.NotContains(t, res.Body, "fire")
		require.NotContains(t, res.Body, "10.0.0.7")
	})
}

func TestEntries(t *testing.T) {
	t.Parallel()
	t1, t2 := uuid.NewString(), uuid.NewString()
	posted := entry(t1, "USD", 1250)
	b := setup(t, posted, entry(t2, "USD", 3))

	t.Run("a posted transfer lists its entry with lines", func(t *testing.T) {
		t.Parallel()
		var body struct {
			Entries []struct {
				ID         string    `json:"id"`
				EventID    string    `json:"event_id"`
				TransferID string    `json:"transfer_id"`
				Currency   string    `json:"currency"`
				PostedAt   time.Time `json:"posted_at"`
				Lines      []struct {
					AccountCode string `json:"account_code"`
					Direction   string `json:"direction"`
					Amount      int64  `json:"amount"`
				} `json:"lines"`
			} `json:"entries"`
		}
		status, contentType := b.get(t, "/v1/entries?transfer_id="+t1, &body)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "application/json", contentType)
		require.Len(t, body.Entries, 1)
		e := body.Entries[0]
		require.Equal(t, posted.ID.String(), e.ID)
		require.Equal(t, posted.EventID, e.EventID)
		require.Equal(t, t1, e.TransferID)
		require.Equal(t, "USD", e.Currency)
		require.False(t, e.PostedAt.IsZero())
		require.Len(t, e.Lines, 2)
		require.Equal(t, "1010", e.Lines[0].AccountCode)
		require.Equal(t, "debit", e.Lines[0].Direction)
		require.Equal(t, int64(1250), e.Lines[0].Amount)
		require.Equal(t, "2010", e.Lines[1].AccountCode)
		require.Equal(t, "credit", e.Lines[1].Direction)
		require.Equal(t, int64(1250), e.Lines[1].Amount)
	})

	t.Run("an unposted transfer has an empty list, not null", func(t *testing.T) {
		t.Parallel()
		var body map[string]json.RawMessage
		status, _ := b.get(t, "/v1/entries?transfer_id="+uuid.NewString(), &body)
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(body["entries"]))
	})

	t.Run("an empty transfer_id is a bad request", func(t *testing.T) {
		t.Parallel()
		b.requireInvalid(t, "/v1/entries?transfer_id=", http.StatusBadRequest, "invalid-transfer-id")
		b.requireInvalid(t, "/v1/entries?transfer_id=t-1", http.StatusBadRequest, "invalid-transfer-id")
		b.requireInvalid(t, "/v1/entries?event_id=not-a-uuid", http.StatusBadRequest, "invalid-event-id")
		b.requireInvalid(t, "/v1/entries?transfer_id=%zz", http.StatusBadRequest, "invalid-query")
	})

	t.Run("an event finds its entry", func(t *testing.T) {
		t.Parallel()
		var body struct {
			Entries []struct {
				ID         string `json:"id"`
				TransferID string `json:"transfer_id"`
			} `json:"entries"`
		}
		status, _ := b.get(t, "/v1/entries?event_id="+url.QueryEscape(posted.EventID), &body)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, body.Entries, 1)
		require.Equal(t, posted.ID.String(), body.Entries[0].ID)
		require.Equal(t, t1, body.Entries[0].TransferID)
	})

	t.Run("without a filter the entries are paged by posting time", func(t *testing.T) {
		t.Parallel()
		type page struct {
			Entries []struct {
				TransferID string `json:"transfer_id"`
			} `json:"entries"`
			NextCursor *string `json:"next_cursor"`
		}
		var first, second page
		status, _ := b.get(t, "/v1/entries?limit=1", &first)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, first.Entries, 1)
		require.Equal(t, t1, first.Entries[0].TransferID)
		require.NotNil(t, first.NextCursor)
		status, _ = b.get(t, "/v1/entries?limit=1&after="+*first.NextCursor, &second)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, second.Entries, 1)
		require.Equal(t, t2, second.Entries[0].TransferID)
		require.Nil(t, second.NextCursor, "the last page has no cursor")
	})

	t.Run("a time range in the future is empty", func(t *testing.T) {
		t.Parallel()
		var body map[string]json.RawMessage
		from := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		status, _ := b.get(t, "/v1/entries?from="+from, &body)
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(body["entries"]))
		require.JSONEq(t, `null`, string(body["next_cursor"]))
	})

	t.Run("a range that ends at the zero time (year 1) is empty, not open", func(t *testing.T) {
		t.Parallel()
		var body map[string]json.RawMessage
		status, _ := b.get(t, "/v1/entries?to=0001-01-01T00:00:00Z", &body)
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(body["entries"]))
	})

	problems := []struct {
		name, path, slug string
		invalid          bool // the OpenAPI document refuses the request too
	}{
		{"transfer_id and event_id together are a bad request", "/v1/entries?transfer_id=t-1&event_id=e", "invalid-query", true},
		{"event_id with a time range is a bad request", "/v1/entries?event_id=e&from=2026-01-01T00:00:00Z", "invalid-query", true},
		{"a malformed from is a bad request", "/v1/entries?from=yesterday", "invalid-time", true},
		{"a zero limit is a bad request", "/v1/entries?limit=0", "invalid-limit", true},
		{"a limit over the maximum is a bad request", "/v1/entries?limit=100000", "invalid-limit", true},
		{"a cursor that is not an entry id is a bad request", "/v1/entries?after=nope", "invalid-cursor", false},
	}
	for _, tt := range problems {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.invalid {
				b.requireInvalid(t, tt.path, http.StatusBadRequest, tt.slug)
				return
			}
			b.requireProblem(t, tt.path, http.StatusBadRequest, tt.slug)
		})
	}

	t.Run("an overlong transfer_id is a bad request", func(t *testing.T) {
		t.Parallel()
		long := make([]byte, 300)
		for i := range long {
			long[i] = 'x'
		}
		b.requireInvalid(t, "/v1/entries?transfer_id="+string(long), http.StatusBadRequest, "invalid-transfer-id")
	})
}

func TestAccountBalance(t *testing.T) {
	t.Parallel()
	b := setup(t, entry("t-1", "USD", 100), entry("t-2", "USD", 50), entry("t-3", "EUR", 9))

	tests := []struct {
		name string
		path string
		want string
	}{
		{"a debit account sums its debits", "/v1/accounts/1010/balance?currency=USD",
			`{"account_code":"1010","currency":"USD","minor_units":2,"normal_balance":"debit","as_of":null,"debits":150,"credits":0,"balance":150}`},
		{"a credit account sums its credits in the currency asked", "/v1/accounts/2010/balance?currency=EUR",
			`{"account_code":"2010","currency":"EUR","minor_units":2,"normal_balance":"credit","as_of":null,"debits":0,"credits":9,"balance":9}`},
		{"a currency without lines gives zeros", "/v1/accounts/2010/balance?currency=JPY",
			`{"account_code":"2010","currency":"JPY","minor_units":0,"normal_balance":"credit","as_of":null,"debits":0,"credits":0,"balance":0}`},
		{"a balance as of a time before any posting is zero", "/v1/accounts/1010/balance?currency=USD&as_of=2000-01-01T00:00:00Z",
			`{"account_code":"1010","currency":"USD","minor_units":2,"normal_balance":"debit","as_of":"2000-01-01T00:00:00Z","debits":0,"credits":0,"balance":0}`},
		{"a balance as of the zero time (year 1) is zero as of that time", "/v1/accounts/1010/balance?currency=USD&as_of=0001-01-01T00:00:00Z",
			`{"account_code":"1010","currency":"USD","minor_units":2,"normal_balance":"debit","as_of":"0001-01-01T00:00:00Z","debits":0,"credits":0,"balance":0}`},
		{"an as_of with an offset is echoed in UTC", "/v1/accounts/2010/balance?currency=USD&as_of=" + url.QueryEscape("0001-01-01T02:00:00+02:00"),
			`{"account_code":"2010","currency":"USD","minor_units":2,"normal_balance":"credit","as_of":"0001-01-01T00:00:00Z","debits":0,"credits":0,"balance":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body json.RawMessage
			status, contentType := b.get(t, tt.path, &body)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, "application/json", contentType)
			require.JSONEq(t, tt.want, string(body))
		})
	}

	problems := []struct {
		name    string
		path    string
		status  int
		slug    string
		invalid bool // the OpenAPI document refuses the request too
	}{
		{"an unknown account is not found", "/v1/accounts/9999/balance?currency=USD", http.StatusNotFound, "account-not-found", false},
		{"a missing currency is a bad request", "/v1/accounts/1010/balance", http.StatusBadRequest, "invalid-currency", true},
		{"a lower-case currency is a bad request", "/v1/accounts/1010/balance?currency=usd", http.StatusBadRequest, "invalid-currency", true},
		{"a long currency is a bad request", "/v1/accounts/1010/balance?currency=" + url.QueryEscape("USDX"), http.StatusBadRequest, "invalid-currency", true},
		{"three letters that name no ISO 4217 currency are a bad request", "/v1/accounts/1010/balance?currency=ZZZ", http.StatusBadRequest, "invalid-currency", false},
		{"a malformed as_of is a bad request", "/v1/accounts/1010/balance?currency=USD&as_of=2026-13-01", http.StatusBadRequest, "invalid-time", true},
	}
	for _, tt := range problems {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.invalid {
				b.requireInvalid(t, tt.path, tt.status, tt.slug)
				return
			}
			b.requireProblem(t, tt.path, tt.status, tt.slug)
		})
	}
}

func TestAccountStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, entry("t-1", "USD", 100), entry("t-2", "USD", 50), entry("t-3", "EUR", 9))
	type page struct {
		AccountCode   string `json:"account_code"`
		Currency      string `json:"currency"`
		NormalBalance string `json:"normal_balance"`
		Lines         []struct {
			LineID         int64     `json:"line_id"`
			EntryID        string    `json:"entry_id"`
			TransferID     string    `json:"transfer_id"`
			Direction      string    `json:"direction"`
			Amount         int64     `json:"amount"`
			PostedAt       time.Time `json:"posted_at"`
			RunningBalance int64     `json:"running_balance"`
		} `json:"lines"`
		NextCursor *string `json:"next_cursor"`
	}

	t.Run("pages carry the running balance across the cursor", func(t *testing.T) {
		t.Parallel()
		var first, second page
		status, contentType := b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=1", &first)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "application/json", contentType)
		require.Equal(t, "credit", first.NormalBalance)
		require.Len(t, first.Lines, 1)
		require.Equal(t, "t-1", first.Lines[0].TransferID)
		require.Equal(t, "credit", first.Lines[0].Direction)
		require.Equal(t, int64(100), first.Lines[0].RunningBalance)
		require.NotNil(t, first.NextCursor)

		status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=1&after="+*first.NextCursor, &second)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, second.Lines, 1)
		require.Equal(t, "t-2", second.Lines[0].TransferID)
		require.Equal(t, int64(150), second.Lines[0].RunningBalance)
		require.Nil(t, second.NextCursor)
	})

	problems := []struct {
		name, path string
		status     int
		slug       string
		invalid    bool // the OpenAPI document refuses the request too
	}{
		{"an unknown account is not found", "/v1/accounts/9999/statement?currency=USD", http.StatusNotFound, "account-not-found", false},
		{"a missing currency is a bad request", "/v1/accounts/1010/statement", http.StatusBadRequest, "invalid-currency", true},
		{"a currency that is no ISO 4217 code is a bad request", "/v1/accounts/1010/statement?currency=ZZZ", http.StatusBadRequest, "invalid-currency", false},
		{"a malformed cursor is a bad request", "/v1/accounts/1010/statement?currency=USD&after=abc", http.StatusBadRequest, "invalid-cursor", false},
		{"a cursor past the last line is a bad request", "/v1/accounts/1010/statement?currency=USD&after=999999999", http.StatusBadRequest, "invalid-cursor", false},
		{"a cursor of another currency's line is a bad request", "/v1/accounts/2010/statement?currency=EUR&after=1", http.StatusBadRequest, "invalid-cursor", false},
		{"a from that is not RFC 3339 is a bad request", "/v1/accounts/1010/statement?currency=USD&from=yesterday", http.StatusBadRequest, "invalid-time", true},
		{"a to that is not RFC 3339 is a bad request", "/v1/accounts/1010/statement?currency=USD&to=2026-01-02", http.StatusBadRequest, "invalid-time", true},
		{"an unknown parameter is a bad request", "/v1/accounts/1010/statement?currency=USD&since=2026-01-02T00:00:00Z", http.StatusBadRequest, "invalid-query", true},
		{"a negative limit is a bad request", "/v1/accounts/1010/statement?currency=USD&limit=-1", http.StatusBadRequest, "invalid-limit", true},
	}
	for _, tt := range problems {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.invalid {
				b.requireInvalid(t, tt.path, tt.status, tt.slug)
				return
			}
			b.requireProblem(t, tt.path, tt.status, tt.slug)
		})
	}
}

func TestTrialBalance(t *testing.T) {
	t.Parallel()

	t.Run("an empty ledger balances with empty lists", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var body json.RawMessage
		status, _ := b.get(t, "/v1/trial-balance", &body)
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `{"as_of":null,"accounts":[],"currencies":[],"balanced":true}`, string(body))
	})

	// Every account's balance is positive on its normal side, as the balance and the
	// statement answer it: a deposit shows cash (1010, an asset) and what is owed to the
	// wallets (2010, a liability) both at its amount.
	t.Run("accounts and totals are per currency, balances positive on the normal side", func(t *testing.T) {
		t.Parallel()
		b := setup(t, entry("t-1", "USD", 100), entry("t-2", "EUR", 9), entry("t-3", "JPY", 500), entry("t-4", "BHD", 500))
		var body json.RawMessage
		status, contentType := b.get(t, "/v1/trial-balance", &body)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "application/json", contentType)
		require.JSONEq(t, `{
			"as_of": null,
			"accounts": [
				{"account_code":"1010","currency":"BHD","normal_balance":"debit","debits":500,"credits":0,"balance":500},
				{"account_code":"2010","currency":"BHD","normal_balance":"credit","debits":0,"credits":500,"balance":500},
				{"account_code":"1010","currency":"EUR","normal_balance":"debit","debits":9,"credits":0,"balance":9},
				{"account_code":"2010","currency":"EUR","normal_balance":"credit","debits":0,"credits":9,"balance":9},
				{"account_code":"1010","currency":"JPY","normal_balance":"debit","debits":500,"credits":0,"balance":500},
				{"account_code":"2010","currency":"JPY","normal_balance":"credit","debits":0,"credits":500,"balance":500},
				{"account_code":"1010","currency":"USD","normal_balance":"debit","debits":100,"credits":0,"balance":100},
				{"account_code":"2010","currency":"USD","normal_balance":"credit","debits":0,"credits":100,"balance":100}
			],
			"currencies": [
				{"currency":"BHD","minor_units":3,"debits":500,"credits":500,"balanced":true},
				{"currency":"EUR","minor_units":2,"debits":9,"credits":9,"balanced":true},
				{"currency":"JPY","minor_units":0,"debits":500,"credits":500,"balanced":true},
				{"currency":"USD","minor_units":2,"debits":100,"credits":100,"balanced":true}
			],
			"balanced": true
		}`, string(body))
	})
}

// Lines are append-only and each is at most int64, but their totals are not: two postings near
// 2^62 put an account past 2^63-1. Every report still answers, to the last digit.
func TestReportsAnswerExactlyWhenSumsLeaveInt64(t *testing.T) {
	t.Parallel()
	const near = 1 << 62
	b := setup(t, entry("t-1", "USD", near+1), entry("t-2", "USD", near+3), entry("t-3", "USD", 5), entry("t-4", "EUR", 9))
	entries, err := b.ledger.EntriesByTransfer(context.Background(), "t-2")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	secondPosted := entries[0].PostedAt.UTC().Format(time.RFC3339Nano)

	tests := []struct {
		name string
		path string
		want string
	}{
		{"an account's balance", "/v1/accounts/1010/balance?currency=USD",
			`{"account_code":"1010","currency":"USD","minor_units":2,"normal_balance":"debit","as_of":null,
			  "debits":9223372036854775817,"credits":0,"balance":9223372036854775817}`},
		{"an account's balance as of a time", "/v1/accounts/2010/balance?currency=USD&as_of=" + url.QueryEscape(secondPosted),
			`{"account_code":"2010","currency":"USD","minor_units":2,"normal_balance":"credit","as_of":"` + secondPosted + `",
			  "debits":0,"credits":9223372036854775812,"balance":9223372036854775812}`},
		{"the balance of the other side, in its own sign", "/v1/accounts/2010/balance?currency=USD",
			`{"account_code":"2010","currency":"USD","minor_units":2,"normal_balance":"credit","as_of":null,
			  "debits":0,"credits":9223372036854775817,"balance":9223372036854775817}`},
		{"the trial balance, which still balances", "/v1/trial-balance",
			`{"as_of":null,"accounts":[
				{"account_code":"1010","currency":"EUR","normal_balance":"debit","debits":9,"credits":0,"balance":9},
				{"account_code":"2010","currency":"EUR","normal_balance":"credit","debits":0,"credits":9,"balance":9},
				{"account_code":"1010","currency":"USD","normal_balance":"debit","debits":9223372036854775817,"credits":0,"balance":9223372036854775817},
				{"account_code":"2010","currency":"USD","normal_balance":"credit","debits":0,"credits":9223372036854775817,"balance":9223372036854775817}],
			  "currencies":[
				{"currency":"EUR","minor_units":2,"debits":9,"credits":9,"balanced":true},
				{"currency":"USD","minor_units":2,"debits":9223372036854775817,"credits":9223372036854775817,"balanced":true}],
			  "balanced":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body json.RawMessage
			status, _ := b.get(t, tt.path, &body)
			require.Equal(t, http.StatusOK, status, string(body))
			requireExactJSON(t, tt.want, string(body))
		})
	}

	t.Run("a statement's running balance, also across a page whose opening is beyond int64", func(t *testing.T) {
		t.Parallel()
		type page struct {
			Lines []struct {
				TransferID     string          `json:"transfer_id"`
				Amount         json.RawMessage `json:"amount"`
				RunningBalance json.RawMessage `json:"running_balance"` // raw: a number's digits, exactly
			} `json:"lines"`
			NextCursor *string `json:"next_cursor"`
		}
		var first, second page
		status, _ := b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=2", &first)
		require.Equal(t, http.StatusOK, status)
		status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=2&after="+*first.NextCursor, &second)
		require.Equal(t, http.StatusOK, status)
		got := map[string][2]string{}
		for _, l := range append(first.Lines, second.Lines...) {
			got[l.TransferID] = [2]string{string(l.Amount), string(l.RunningBalance)}
		}
		require.Equal(t, map[string][2]string{
			"t-1": {"4611686018427387905", "4611686018427387905"},
			"t-2": {"4611686018427387907", "9223372036854775812"},
			"t-3": {"5", "9223372036854775817"},
		}, got)
		require.Nil(t, second.NextCursor)
	})
}

// requireExactJSON is require.JSONEq without its float64: numbers compare digit for digit, so a
// sum beyond 2^53 is checked exactly, and a number never equals a string.
func requireExactJSON(t *testing.T, want, got string) {
	t.Helper()
	decode := func(s string) any {
		d := json.NewDecoder(bytes.NewReader([]byte(s)))
		d.UseNumber()
		var v any
		require.NoError(t, d.Decode(&v), s)
		return v
	}
	require.Equal(t, decode(want), decode(got))
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	// A real pool on a port where nothing listens: the reads fail as they would in an outage.
	// Its user and database have names that must not reach a client.
	pool, err := database.Open(context.Background(), webtest.UnreachableDatabaseURL, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ledger := postgres.NewLedger(pool)
	guard := auth.NewGuard(auth.NewKeys(pool, auth.GLScopes), authtest.Unlimited, gl.ErrUnavailable) // its keys are away too
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{Ledger: ledger, Guard: guard, Health: []web.Check{{Name: "database", Func: ledger.Ping}}}))

	for _, path := range []string{
		"/v1/trial-balance", "/v1/entries?transfer_id=" + uuid.NewString(), "/v1/entries?event_id=" + uuid.NewString(), "/v1/entries?limit=5",
		"/v1/accounts/1010/balance?currency=USD", "/v1/accounts/1010/statement?currency=USD",
	} {
		res := webtest.Do(t, http.MethodGet, server.URL+path, authtest.Bearer("wgl_whatever"), "")
		res.RequireProblem(t, http.StatusServiceUnavailable, "unavailable")
		res.RequireNoConnectionDetails(t)
	}
	webtest.Do(t, http.MethodGet, server.URL+"/healthz", nil, "").RequireUnhealthy(t, map[string]string{"database": "unavailable"})
}

func TestUnroutedRequestsAreProblems(t *testing.T) {
	t.Parallel()
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{}))

	notFound := []struct{ name, method, path string }{
		{"an unknown path is not found", http.MethodGet, "/v1/nothing-here"},
		{"the root is not found", http.MethodGet, "/"},
		{"a post to an unknown path is not found", http.MethodPost, "/v1/nothing-here"},
	}
	for _, tt := range notFound {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			webtest.Do(t, tt.method, server.URL+tt.path, openapitest.Invalid(nil, "no such route"), "").
				RequireProblem(t, http.StatusNotFound, "not-found")
		})
	}

	wrongMethods := []struct{ name, method, path, body string }{
		{"the trial balance cannot be posted", http.MethodPost, "/v1/trial-balance", ""},
		// No GL route reads a body: malformed JSON sent to one is refused for its method.
		{"malformed JSON posted to the entries is not allowed", http.MethodPost, "/v1/entries", `{"transfer_id":`},
		{"an account balance cannot be deleted", http.MethodDelete, "/v1/accounts/1010/balance", ""},
		{"health cannot be put", http.MethodPut, "/healthz", "{}"},
	}
	for _, tt := range wrongMethods {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := webtest.Do(t, tt.method, server.URL+tt.path, openapitest.Invalid(nil, "no such method"), tt.body)
			res.RequireProblem(t, http.StatusMethodNotAllowed, "method-not-allowed")
			require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
		})
	}
}

func TestRequestsAreLoggedAtDebugWithRequestScopedFields(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := zerolog.New(&logs).Level(zerolog.DebugLevel)
	handler := checked(t, httpapi.NewServer(logger, httpapi.Deps{Health: []web.Check{{Name: "database", Func: func(ctx context.Context) error {
		zerolog.Ctx(ctx).Info().Msg("checking health") // handlers log through the request's logger
		return nil
	}}}}))

	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Header.Set("X-Request-Id", "req-42")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "req-42", rec.Header().Get("X-Request-Id"))

	type logLine struct {
		Level     string `json:"level"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
		Path      string `json:"path"`
		Route     string `json:"route"`
		Status    int    `json:"status"`
	}
	var lines []logLine
	dec := json.NewDecoder(&logs)
	for dec.More() {
		var l logLine
		require.NoError(t, dec.Decode(&l))
		lines = append(lines, l)
	}
	require.Len(t, lines, 2)
	require.Equal(t, logLine{Level: "info", Message: "checking health", RequestID: "req-42", Path: "/healthz"}, lines[0])
	require.Equal(t, logLine{Level: "debug", Message: "request", RequestID: "req-42", Path: "/healthz", Route: "GET /healthz", Status: 200}, lines[1])
}

// postedAt is when the transfer's entry was posted.
func (b *testBundle) postedAt(t *testing.T, transferID string) time.Time {
	t.Helper()
	entries, err := b.ledger.EntriesByTransfer(context.Background(), transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0].PostedAt
}

func TestStatementBetweenTwoTimes(t *testing.T) {
	t.Parallel()
	b := setup(t, entry("t-1", "USD", 100), entry("t-2", "USD", 50), entry("t-3", "USD", 7))
	first, second, third := b.postedAt(t, "t-1"), b.postedAt(t, "t-2"), b.postedAt(t, "t-3")
	require.True(t, first.Before(second) && second.Before(third))
	type page struct {
		Lines []struct {
			TransferID     string `json:"transfer_id"`
			RunningBalance int64  `json:"running_balance"`
		} `json:"lines"`
		NextCursor *string `json:"next_cursor"`
	}
	at := func(tm time.Time) string { return url.QueryEscape(tm.Format(time.RFC3339Nano)) }
	tests := []struct {
		name, query string
		want        []string
		running     []int64 // the running balance counts every line before from
	}{
		{"from is inclusive", "&from=" + at(second), []string{"t-2", "t-3"}, []int64{150, 157}},
		{"to is exclusive", "&to=" + at(second), []string{"t-1"}, []int64{100}},
		{"from and to", "&from=" + at(second) + "&to=" + at(third), []string{"t-2"}, []int64{150}},
		{"a window before the first line is empty", "&to=" + at(first), []string{}, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p page
			status, _ := b.get(t, "/v1/accounts/2010/statement?currency=USD"+tt.query, &p)
			require.Equal(t, http.StatusOK, status)
			got, running := []string{}, []int64{}
			for _, l := range p.Lines {
				got = append(got, l.TransferID)
				running = append(running, l.RunningBalance)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.running, running)
			require.Nil(t, p.NextCursor)
		})
	}

	t.Run("pages from a time carry on after the cursor", func(t *testing.T) {
		t.Parallel()
		var one, two page
		b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=1&from="+at(second), &one)
		require.Len(t, one.Lines, 1)
		require.NotNil(t, one.NextCursor)
		b.get(t, "/v1/accounts/2010/statement?currency=USD&limit=1&from="+at(second)+"&after="+*one.NextCursor, &two)
		require.Len(t, two.Lines, 1)
		require.Equal(t, "t-3", two.Lines[0].TransferID)
		require.Equal(t, int64(157), two.Lines[0].RunningBalance)
	})
}

func TestTrialBalanceAsOfATime(t *testing.T) {
	t.Parallel()
	b := setup(t, entry("t-1", "USD", 100), entry("t-2", "USD", 50))
	first := b.postedAt(t, "t-1")
	at := url.QueryEscape(first.Format(time.RFC3339Nano))

	var body json.RawMessage
	status, _ := b.get(t, "/v1/trial-balance?as_of="+at, &body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{
		"as_of": "`+first.UTC().Format(time.RFC3339Nano)+`",
		"accounts": [
			{"account_code":"1010","currency":"USD","normal_balance":"debit","debits":100,"credits":0,"balance":100},
			{"account_code":"2010","currency":"USD","normal_balance":"credit","debits":0,"credits":100,"balance":100}
		],
		"currencies": [{"currency":"USD","minor_units":2,"debits":100,"credits":100,"balanced":true}],
		"balanced": true
	}`, string(body))

	before := url.QueryEscape(first.Add(-time.Microsecond).Format(time.RFC3339Nano))
	status, _ = b.get(t, "/v1/trial-balance?as_of="+before, &body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"as_of":"`+first.Add(-time.Microsecond).UTC().Format(time.RFC3339Nano)+`","accounts":[],"currencies":[],"balanced":true}`, string(body))

	b.requireInvalid(t, "/v1/trial-balance?as_of=today", http.StatusBadRequest, "invalid-time")
	b.requireInvalid(t, "/v1/trial-balance?at="+at, http.StatusBadRequest, "invalid-query")
}

func TestEntriesRefuseACursorThatNamesNoEntry(t *testing.T) {
	t.Parallel()
	b := setup(t, entry("t-1", "USD", 100))
	b.requireProblem(t, "/v1/entries?after="+uuid.Must(uuid.NewV7()).String(), http.StatusBadRequest, "invalid-cursor")
	b.requireProblem(t, "/v1/entries?after=not-a-cursor", http.StatusBadRequest, "invalid-cursor")
}

// requireProblemWith is requireProblem with header's marks (openapitest.Invalid, Unchecked).
func (b *testBundle) requireProblemWith(t *testing.T, path string, header http.Header, status int, slug string) web.Problem {
	t.Helper()
	header = header.Clone()
	for k, v := range authtest.Bearer(b.key) {
		header[k] = v
	}
	return webtest.Do(t, http.MethodGet, b.server.URL+path, header, "").RequireProblem(t, status, slug)
}
