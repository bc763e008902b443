package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/console"
	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// adjustmentJSON is an adjustment's entry as the API answers it.
type adjustmentJSON struct {
	ID           string `json:"id"`
	EventID      string `json:"event_id"`
	TransferID   string `json:"transfer_id"`
	Currency     string `json:"currency"`
	EventType    string `json:"event_type"`
	Kind         string `json:"kind"`
	Adjustment   bool   `json:"adjustment"`
	AdjustmentID string `json:"adjustment_id"`
	Reason       string `json:"reason"`
	Lines        []struct {
		AccountCode string `json:"account_code"`
		Direction   string `json:"direction"`
		Amount      int64  `json:"amount"`
		WalletID    string `json:"wallet_id"`
	} `json:"lines"`
}

// A correction of a wallet's balance owed: cash up, alice's sub-account of 2010 up.
const aliceAdjustment = `{"reason":"bank fee refunded by hand","currency":"USD","lines":[` +
	`{"account":"1010","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`

// adjust posts body to POST /v1/adjustments with key (the secret) and Idempotency-Key idem.
func (b *testBundle) adjust(t *testing.T, key, idem, body string, header http.Header) webtest.Response {
	t.Helper()
	h := authtest.Bearer(key)
	for k, vs := range header {
		h[k] = vs
	}
	if idem != "" {
		h.Set("Idempotency-Key", idem)
	}
	return webtest.Do(t, http.MethodPost, b.server.URL+"/v1/adjustments", h, body)
}

func (b *testBundle) entryCount(t *testing.T) int {
	t.Helper()
	page, err := b.ledger.Entries(context.Background(), gl.EntryQuery{Limit: gl.MaxPageSize})
	require.NoError(t, err)
	return len(page.Entries)
}

func TestAnAdjustmentIsPostedAndShownAsSuchInEveryRead(t *testing.T) {
	t.Parallel()
	b := setup(t)

	res := b.adjust(t, b.key, "fix-1", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Empty(t, res.Header.Get(httpapi.HeaderIdempotencyReplayed))
	var posted adjustmentJSON
	res.Decode(t, &posted)
	require.True(t, posted.Adjustment)
	require.Equal(t, "bank fee refunded by hand", posted.Reason)
	require.Equal(t, gl.TypeAdjustment, posted.EventType)
	require.Equal(t, gl.KindAdjustment, posted.Kind)
	require.Equal(t, "adjustment:"+posted.AdjustmentID, posted.TransferID)
	require.Equal(t, posted.TransferID, posted.EventID)
	require.Len(t, posted.Lines, 2)
	require.Equal(t, "1010", posted.Lines[0].AccountCode)
	require.Equal(t, "debit", posted.Lines[0].Direction)
	require.Equal(t, "", posted.Lines[0].WalletID)
	require.Equal(t, "2010", posted.Lines[1].AccountCode)
	require.Equal(t, "credit", posted.Lines[1].Direction)
	require.Equal(t, "alice", posted.Lines[1].WalletID)

	// The entry by its key and in the listing by posting time.
	var byKey struct {
		Entries []adjustmentJSON `json:"entries"`
	}
	status, _ := b.get(t, "/v1/entries?transfer_id="+posted.TransferID, &byKey)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []adjustmentJSON{posted}, byKey.Entries)
	status, _ = b.get(t, "/v1/entries", &byKey)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []adjustmentJSON{posted}, byKey.Entries)

	// The statement of alice's sub-account marks the line; balances and the trial balance count it.
	var st struct {
		Lines []struct {
			TransferID     string `json:"transfer_id"`
			Adjustment     bool   `json:"adjustment"`
			RunningBalance int64  `json:"running_balance"`
		} `json:"lines"`
	}
	status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=alice", &st)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, st.Lines, 1)
	require.True(t, st.Lines[0].Adjustment)
	require.Equal(t, posted.TransferID, st.Lines[0].TransferID)
	require.Equal(t, int64(100), st.Lines[0].RunningBalance)

	var bal struct {
		Balance int64 `json:"balance"`
	}
	status, _ = b.get(t, "/v1/accounts/1010/balance?currency=USD", &bal)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, int64(100), bal.Balance)

	var tb struct {
		Accounts []struct {
			AccountCode string `json:"account_code"`
			Debits      int64  `json:"debits"`
			Credits     int64  `json:"credits"`
		} `json:"accounts"`
		Balanced bool `json:"balanced"`
	}
	status, _ = b.get(t, "/v1/trial-balance", &tb)
	require.Equal(t, http.StatusOK, status)
	require.True(t, tb.Balanced)
	require.Len(t, tb.Accounts, 2)
	require.Equal(t, int64(100), tb.Accounts[0].Debits+tb.Accounts[1].Debits)

	// An entry of a transfer shows no adjustment fields.
	var plain map[string]json.RawMessage
	require.NoError(t, database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		_, err := b.ledger.Post(context.Background(), tx, entry(uuid.NewString(), "USD", 5))
		return err
	}))
	var page struct {
		Entries []map[string]json.RawMessage `json:"entries"`
	}
	b.get(t, "/v1/entries", &page)
	require.Len(t, page.Entries, 2)
	plain = page.Entries[1]
	require.NotContains(t, plain, "adjustment")
	require.NotContains(t, plain, "reason")
}

func TestAnAdjustmentIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	invalid := func(why string) http.Header { return openapitest.Invalid(nil, why) }
	for _, tt := range []struct {
		name   string
		body   string
		idem   string
		header http.Header
		status int
		slug   string
	}{
		{"when debits and credits differ", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":100},{"account":"2010","credit":90,"wallet_id":"alice"}]}`,
			"k", nil, http.StatusUnprocessableEntity, "entry-unbalanced"},
		{"when an account is not in the chart", `{"reason":"r","currency":"USD","lines":[{"account":"9999","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", nil, http.StatusUnprocessableEntity, "account-not-found"},
		{"when a line on a control account names no wallet", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":100},{"account":"2010","credit":100}]}`,
			"k", nil, http.StatusUnprocessableEntity, "wallet-id-required"},
		{"when a line on the hold account names no wallet", `{"reason":"r","currency":"USD","lines":[{"account":"2020","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", nil, http.StatusUnprocessableEntity, "wallet-id-required"},
		{"when a line on another account names a wallet", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":100,"wallet_id":"alice"},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", nil, http.StatusUnprocessableEntity, "wallet-id-not-allowed"},
		{"when the currency is not a code", `{"reason":"r","currency":"usd","lines":[{"account":"1010","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", invalid("lower-case currency"), http.StatusBadRequest, "invalid-currency"},
		{"when the currency is no ISO 4217 code", `{"reason":"r","currency":"ZZZ","lines":[{"account":"1010","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", openapitest.Unchecked(nil, "three letters that name no ISO 4217 currency"), http.StatusBadRequest, "invalid-currency"},
		{"when an amount is negative", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":-100},{"account":"2010","credit":-100,"wallet_id":"alice"}]}`,
			"k", invalid("negative amounts"), http.StatusBadRequest, "invalid-request"},
		{"when a line has both a debit and a credit", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":100,"credit":100},{"account":"2010","credit":100,"debit":100,"wallet_id":"alice"}]}`,
			"k", invalid("both sides"), http.StatusBadRequest, "invalid-request"},
		{"when an amount is a fraction", `{"reason":"r","currency":"USD","lines":[{"account":"1010","debit":1.5},{"account":"2010","credit":1.5,"wallet_id":"alice"}]}`,
			"k", invalid("fractional amount"), http.StatusBadRequest, "invalid-request"},
		{"when the reason is blank", `{"reason":"   ","currency":"USD","lines":[{"account":"1010","debit":100},{"account":"2010","credit":100,"wallet_id":"alice"}]}`,
			"k", nil, http.StatusBadRequest, "invalid-request"},
		{"without an Idempotency-Key", aliceAdjustment, "", invalid("no Idempotency-Key"), http.StatusBadRequest, "invalid-request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := b.adjust(t, b.key, tt.idem, tt.body, tt.header)
			res.RequireProblem(t, tt.status, tt.slug)
		})
	}
	require.Zero(t, b.entryCount(t), "a refused adjustment posts nothing")

	// A refusal keeps no key: the same key then posts a valid adjustment.
	res := b.adjust(t, b.key, "k", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
}

func TestAnAdjustmentsKeyReplaysItsEntryAndRefusesAnotherBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.adjust(t, b.key, "fix-once", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)

	again := b.adjust(t, b.key, "fix-once", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get(httpapi.HeaderIdempotencyReplayed))
	var a, b2 adjustmentJSON
	first.Decode(t, &a)
	again.Decode(t, &b2)
	require.Equal(t, a, b2)

	other := `{"reason":"bank fee refunded by hand","currency":"USD","lines":[` +
		`{"account":"1010","debit":101},{"account":"2010","credit":101,"wallet_id":"alice"}]}`
	b.adjust(t, b.key, "fix-once", other, nil).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	require.Equal(t, 1, b.entryCount(t))
}

func TestAnAdjustmentNeedsLedgerWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, reader, err := b.keys.Create(context.Background(), auth.Actor{Name: "test"}, "reader", []auth.Scope{httpapi.ScopeLedgerRead, auth.MetricsRead})
	require.NoError(t, err)
	b.adjust(t, reader, "k", aliceAdjustment, nil).RequireProblem(t, http.StatusForbidden, "forbidden")

	_, writer, err := b.keys.Create(context.Background(), auth.Actor{Name: "test"}, "accountant", []auth.Scope{httpapi.ScopeLedgerWrite})
	require.NoError(t, err)
	res := b.adjust(t, writer, "k", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Equal(t, 1, b.entryCount(t))
}

func TestAnAdjustmentIsAuditedWithTheKeyThatMadeIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, secret, err := b.keys.Create(context.Background(), auth.Actor{Name: "test"}, "accountant", []auth.Scope{httpapi.ScopeLedgerWrite})
	require.NoError(t, err)
	res := b.adjust(t, secret, "fix-audited", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var posted adjustmentJSON
	res.Decode(t, &posted)

	trail, err := b.keys.AuditLog(context.Background(), 0, 100)
	require.NoError(t, err)
	var found []auth.AuditEntry
	for _, e := range trail {
		if e.Action == "adjustment.post" {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1)
	require.Equal(t, posted.TransferID, found[0].Target)
	require.NotNil(t, found[0].KeyID)
	require.Equal(t, key.ID, *found[0].KeyID)
	require.Equal(t, "accountant", found[0].Actor)
	var detail struct {
		EntryID string `json:"entry_id"`
		Reason  string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal(found[0].Detail, &detail))
	require.Equal(t, posted.ID, detail.EntryID)
	require.Equal(t, "bank fee refunded by hand", detail.Reason)

	// A replay is no second adjustment: nothing more in the trail.
	require.Equal(t, http.StatusCreated, b.adjust(t, secret, "fix-audited", aliceAdjustment, nil).Status)
	trail, err = b.keys.AuditLog(context.Background(), 0, 100)
	require.NoError(t, err)
	n := 0
	for _, e := range trail {
		if e.Action == "adjustment.post" {
			n++
		}
	}
	require.Equal(t, 1, n)
}

// gl verify passes with adjustments, on every account kind (cash, a wallet's balance, a wallet's
// hold account), and finds an adjustment entry written around the API, without its row.
func TestVerifyPassesWithAdjustmentsAndFindsOneWithoutItsRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, body := range []string{
		aliceAdjustment,
		`{"reason":"hold posted twice","currency":"USD","lines":[{"account":"2020","debit":40,"wallet_id":"alice"},{"account":"2010","credit":40,"wallet_id":"alice"}]}`,
	} {
		res := b.adjust(t, b.key, "fix-"+string(rune('a'+i)), body, nil)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	checks, err := b.ledger.Verify(context.Background(), 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.True(t, c.Passed(), "%s: %v", c.Name, c.Offenders)
	}

	// An adjustment entry posted straight into the ledger has no adjustment row.
	id := uuid.Must(uuid.NewV7())
	stray := gl.Entry{
		ID: uuid.Must(uuid.NewV7()), EventID: gl.AdjustmentKey(id), TransferID: gl.AdjustmentKey(id), Currency: "USD",
		EventType: gl.TypeAdjustment, Kind: gl.KindAdjustment, OccurredAt: posted(t, b).OccurredAt,
		Lines: []gl.Line{
			{AccountCode: "1010", Direction: gl.Debit, Amount: 7},
			{AccountCode: "2010", Direction: gl.Credit, Amount: 7, WalletID: "alice"},
		},
	}
	require.NoError(t, database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		_, err := b.ledger.Post(context.Background(), tx, stray)
		return err
	}))
	checks, err = b.ledger.Verify(context.Background(), 0)
	require.NoError(t, err)
	var failed []gl.Check
	for _, c := range checks {
		if !c.Passed() {
			failed = append(failed, c)
		}
	}
	require.Len(t, failed, 1)
	require.Contains(t, failed[0].Name, "adjustment")
	require.Equal(t, []string{stray.ID.String()}, failed[0].Offenders)
}

// posted is the first entry of b's ledger.
func posted(t *testing.T, b *testBundle) gl.Entry {
	t.Helper()
	page, err := b.ledger.Entries(context.Background(), gl.EntryQuery{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Entries)
	return page.Entries[0]
}

// Requests with one key sent at once post one entry: the others wait for the first on the key's
// unique index and answer with its entry.
func TestConcurrentRequestsWithOneKeyPostOneAdjustment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 6
	results := make([]webtest.Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // no require here: a failure is reported after Wait, on the test's goroutine
			defer wg.Done()
			results[i], errs[i] = send(b.server.URL+"/v1/adjustments", b.key, "fix-together", aliceAdjustment)
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	replayed := 0
	for i, res := range results {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		var a adjustmentJSON
		res.Decode(t, &a)
		ids[a.ID] = true
		if res.Header.Get(httpapi.HeaderIdempotencyReplayed) == "true" {
			replayed++
		}
	}
	require.Len(t, ids, 1)
	require.Equal(t, n-1, replayed)
	require.Equal(t, 1, b.entryCount(t))
}

// The journal keeps the adjustments' key space to them: a transfer's entry cannot take it, and
// an adjustment's entry cannot be of another kind.
func TestTheDatabaseKeepsAdjustmentKeysToAdjustments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(e gl.Entry) error {
		return database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := b.ledger.Post(context.Background(), tx, e)
			return err
		})
	}
	key := gl.AdjustmentKey(uuid.Must(uuid.NewV7()))
	require.ErrorContains(t, post(entry(key, "USD", 5)), "journal_entries_adjustment_key")

	e := entry(uuid.NewString(), "USD", 5)
	e.EventType, e.Kind = gl.TypeAdjustment, gl.KindAdjustment
	require.ErrorContains(t, post(e), "journal_entries_adjustment_key")
	require.Zero(t, b.entryCount(t))
}

// send posts body to url with the key and Idempotency-Key idem, without failing a test: for
// goroutines other than the test's.
func send(url, key, idem, body string) (webtest.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return webtest.Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idem)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return webtest.Response{}, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return webtest.Response{Status: res.StatusCode, Header: res.Header, Body: string(data)}, err
}

// The console's entry and account pages mark an adjustment, with its reason.
func TestTheConsoleMarksAnAdjustment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.adjust(t, b.key, "fix-shown", aliceAdjustment, nil)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var posted adjustmentJSON
	res.Decode(t, &posted)

	c, err := console.New(console.Config{Service: "gl", Guard: b.guard, Metrics: metrics.New("gl"),
		Pages: httpapi.Books{Ledger: b.ledger, Scope: httpapi.ScopeLedgerRead}.Pages()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := browser.PostForm(srv.URL+"/console/login", url.Values{"key": {b.key}})
	require.NoError(t, err)
	login.Body.Close()
	require.Equal(t, http.StatusSeeOther, login.StatusCode)

	page := func(path string) string {
		t.Helper()
		res, err := browser.Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		return string(body)
	}
	entries := page("/console/entries?" + url.Values{"id": {posted.TransferID}}.Encode())
	require.Contains(t, entries, `<strong class="adjustment">adjustment</strong>`)
	require.Contains(t, entries, "bank fee refunded by hand")
	require.Contains(t, entries, "<td>alice</td>")
	account := page("/console/accounts?code=2010&currency=USD")
	require.Contains(t, account, posted.TransferID)
	require.Contains(t, account, `<strong class="adjustment">adjustment</strong>`)
	require.NotContains(t, page("/console/accounts?code=1010&currency=EUR"), `class="adjustment"`)
}
