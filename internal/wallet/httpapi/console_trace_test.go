package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/console"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/glapi"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web"
)

// traceBundle is the wallet's console (its outbox pages and its transfer pages) over a real
// database, with the GL's API answered by a double that has an entry for every key asked.
type traceBundle struct {
	srv   *httptest.Server
	pool  *pgxpool.Pool
	store *postgres.Store
	keys  *auth.Keys
	admin string // a key with every scope
}

func setupTrace(t *testing.T) *traceBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{})
	keys, guard, secret := authtest.Key(t, pool, auth.WalletScopes)
	gl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("transfer_id")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"entries": []glapi.Entry{{
			ID: "entry-" + key, EventID: "event-of-" + key, TransferID: key, Currency: "USD", PostedAt: time.Now(),
			Lines: []glapi.Line{{AccountCode: "2010", Direction: "debit", Amount: 1}, {AccountCode: "2020", Direction: "credit", Amount: 1}},
		}}})
	}))
	t.Cleanup(gl.Close)
	ops := admin.New(pool)
	events := console.Events{Admin: ops, Audit: keys, View: httpapi.ScopeOutboxAdmin, Requeue: httpapi.ScopeOutboxAdmin,
		RetryScope: httpapi.ScopeInboxAdmin, MaxAttempts: 10, TracePath: "/console/transfers/"}
	trace := httpapi.Trace{Transfers: store, Admin: ops, GL: glapi.New(gl.URL, "gl-key"), Stream: "WALLET_EVENTS",
		Scope: httpapi.ScopeTransfersRead, Requeue: httpapi.ScopeOutboxAdmin, MaxAttempts: 10}
	c, err := console.New(console.Config{Service: "wallet", Guard: guard, Metrics: metrics.New("wallet"), Pages: append(events.Pages(), trace.Pages()...)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
	t.Cleanup(srv.Close)
	return &traceBundle{srv: srv, pool: pool, store: store, keys: keys, admin: secret}
}

// traceBrowser is a logged-in browser that does not follow redirects.
type traceBrowser struct {
	t   *testing.T
	b   *traceBundle
	c   *http.Client
	url string
}

func (b *traceBundle) browser(t *testing.T, key string) *traceBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(b.srv.URL+"/console/login", url.Values{"key": {key}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	return &traceBrowser{t: t, b: b, c: c, url: b.srv.URL}
}

func (br *traceBrowser) do(req *http.Request) (int, string, string) {
	br.t.Helper()
	res, err := br.c.Do(req)
	require.NoError(br.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(br.t, err)
	return res.StatusCode, string(body), res.Header.Get("Location")
}

func (br *traceBrowser) get(path string) (int, string, string) {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodGet, br.url+path, nil)
	require.NoError(br.t, err)
	return br.do(req)
}

// follow GETs path and the redirects it leads to, within the console.
func (br *traceBrowser) follow(path string) (int, string, string) {
	br.t.Helper()
	for i := 0; i < 5; i++ {
		status, body, loc := br.get(path)
		if status != http.StatusSeeOther {
			return status, body, path
		}
		path, _, _ = strings.Cut(loc, "#")
	}
	br.t.Fatalf("too many redirects from %s", path)
	return 0, "", ""
}

func (br *traceBrowser) post(path string, form url.Values) (int, string, string) {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodPost, br.url+path, strings.NewReader(form.Encode()))
	require.NoError(br.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", br.url)
	return br.do(req)
}

// world is one of every kind of aggregate the wallet's outbox has rows of.
type world struct {
	first, second, reversal wallet.Transfer
	captured, voided        wallet.Hold
	batch                   wallet.Batch
	batchReversal           wallet.BatchReversal
}

func makeWorld(t *testing.T, store *postgres.Store) world {
	t.Helper()
	ctx := context.Background()
	for _, w := range []wallet.Wallet{{ID: "mint", Currency: "USD", AllowNegative: true}, {ID: "alice", Currency: "USD"}, {ID: "bob", Currency: "USD"}} {
		_, err := store.CreateWallet(ctx, w)
		require.NoError(t, err)
	}
	var w world
	var err error
	w.first, _, err = store.CreateTransfer(ctx, wallet.TransferRequest{IdempotencyKey: "first", FromWalletID: "mint", ToWalletID: "alice", Amount: 1000, Currency: "USD"})
	require.NoError(t, err)
	w.second, _, err = store.CreateTransfer(ctx, wallet.TransferRequest{IdempotencyKey: "second", FromWalletID: "mint", ToWalletID: "alice", Amount: 500, Currency: "USD"})
	require.NoError(t, err)
	w.reversal, _, err = store.ReverseTransfer(ctx, wallet.ReversalRequest{IdempotencyKey: "second-back", TransferID: w.second.ID, Amount: 100})
	require.NoError(t, err)
	w.captured, _, err = store.PlaceHold(ctx, wallet.HoldRequest{IdempotencyKey: "hold-1", WalletID: "alice", Amount: 200, Metadata: metadata.Metadata{"cart": "c-<1>"}})
	require.NoError(t, err)
	w.captured, _, err = store.CaptureHold(ctx, wallet.CaptureRequest{IdempotencyKey: "capture-1", HoldID: w.captured.ID, ToWalletID: "bob"})
	require.NoError(t, err)
	w.voided, _, err = store.PlaceHold(ctx, wallet.HoldRequest{IdempotencyKey: "hold-2", WalletID: "alice", Amount: 50})
	require.NoError(t, err)
	w.voided, err = store.VoidHold(ctx, w.voided.ID)
	require.NoError(t, err)
	w.batch, _, err = store.CreateBatch(ctx, wallet.BatchRequest{IdempotencyKey: "batch-1", Metadata: metadata.Metadata{"payroll": "p-7"}, Legs: []wallet.BatchLegRequest{
		{FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD"},
		{FromWalletID: "alice", ToWalletID: "bob", Amount: 20, Currency: "USD"},
	}})
	require.NoError(t, err)
	w.batchReversal, _, err = store.ReverseBatch(ctx, wallet.BatchReversalRequest{IdempotencyKey: "batch-1-back", BatchID: w.batch.ID})
	require.NoError(t, err)
	return w
}

func setOutboxStatus(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, status string) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE outbox SET status = 'dispatching', lease_owner = 'test', lease_until = now() + interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE outbox SET status = $2, attempts = 10, last_error = 'message size exceeds maximum allowed' WHERE id = $1`, id, status)
	require.NoError(t, err)
}

// Every outbox row of every event type the wallet writes links to a page that answers 200:
// a transfer's and a reversal's trace, a hold's page (its placement and its capture or void),
// a batch's page (and a batch reversal's, which is its batch's).
func TestEveryOutboxRowsTraceLinkAnswers(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	makeWorld(t, b.store)
	br := b.browser(t, b.admin)
	rows, err := b.pool.Query(context.Background(), `SELECT event_type, aggregate_id FROM outbox ORDER BY created_at`)
	require.NoError(t, err)
	types := map[string]bool{}
	var links [][2]string
	for rows.Next() {
		var typ, agg string
		require.NoError(t, rows.Scan(&typ, &agg))
		types[typ] = true
		links = append(links, [2]string{typ, agg})
	}
	require.NoError(t, rows.Err())
	require.Len(t, types, 7, "every event type the wallet writes: %v", types)

	_, list, _ := br.get("/console/outbox?status=all")
	for _, l := range links {
		require.Contains(t, list, `href="/console/transfers/`+l[1]+`"`, "the outbox page links %s's aggregate", l[0])
		status, body, at := br.follow("/console/transfers/" + l[1])
		require.Equal(t, http.StatusOK, status, "%s %s: %s", l[0], l[1], body)
		require.Contains(t, body, l[1], "%s: %s traces its aggregate", l[0], at)
	}
}

// A hold's page traces its placement and its capture (or void): each event's outbox row and
// the GL's entry keyed hold:<id>:placed and hold:<id>:released, with the hold's metadata and
// its capture's transfer.
func TestAHoldIsTracedThroughBothItsEvents(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	w := makeWorld(t, b.store)
	br := b.browser(t, b.admin)
	id := w.captured.ID.String()
	status, _, loc := br.get("/console/transfers/" + id)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/console/holds/"+id, loc)
	status, body, _ := br.get("/console/holds/" + id)
	require.Equal(t, http.StatusOK, status, body)
	for _, want := range []string{
		"HoldPlaced.v1", "HoldCaptured.v1",
		`href="/console/outbox/` + w.captured.PlacedEventID.String() + `"`, `href="/console/outbox/` + w.captured.FinishedEventID.String() + `"`,
		`>entry-hold:` + id + `:placed<`, `>entry-hold:` + id + `:released<`,
		`<td><code>cart</code></td><td>c-&lt;1&gt;</td>`,
		`href="/console/transfers/` + w.captured.CaptureTransferID.String() + `" data-field="capture-transfer"`,
	} {
		require.Contains(t, body, want)
	}
	_, voided, _ := br.get("/console/holds/" + w.voided.ID.String())
	require.Contains(t, voided, "HoldVoided.v1")
	require.Contains(t, voided, "hold voided (requested)")
	status, _, _ = br.get("/console/holds/" + uuid.NewString())
	require.Equal(t, http.StatusNotFound, status)
}

// A batch's page shows its legs (each linking to its transfer page), its metadata, its one
// outbox row, its GL entry (keyed by the batch id) and its reversals; a leg's page says which
// leg of which batch it is and shows the batch's outbox row; a batch reversal's id opens its
// batch's page.
func TestABatchIsTracedWithItsLegsAndReversals(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	w := makeWorld(t, b.store)
	br := b.browser(t, b.admin)
	id := w.batch.ID.String()
	status, body, _ := br.follow("/console/transfers/" + id)
	require.Equal(t, http.StatusOK, status, body)
	for _, want := range []string{
		`href="/console/transfers/` + w.batch.Legs[0].ID.String() + `" data-leg=`, `href="/console/transfers/` + w.batch.Legs[1].ID.String() + `" data-leg=`,
		`<td><code>payroll</code></td><td>p-7</td>`, "TransferBatchCompleted.v1", `href="/console/outbox/` + w.batch.EventID.String() + `"`,
		`>entry-` + id + `<`, `id="reversal-` + w.batchReversal.ID.String() + `"`, "TransferBatchReversed.v1",
		`>entry-` + w.batchReversal.ID.String() + `<`, `href="/console/outbox/` + w.batchReversal.EventID.String() + `"`,
	} {
		require.Contains(t, body, want)
	}

	status, leg, _ := br.get("/console/transfers/" + w.batch.Legs[1].ID.String())
	require.Equal(t, http.StatusOK, status, leg)
	require.Contains(t, leg, `leg 2 of batch <a href="/console/batches/`+id+`">`)
	require.Contains(t, leg, `href="/console/outbox/`+w.batch.EventID.String()+`"`, "a leg's event is its batch's")
	require.Contains(t, leg, `data-field="gl-entry">entry-`+id+`<`, "a leg's entry is its batch's")

	status, _, loc := br.get("/console/transfers/" + w.batchReversal.ID.String())
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/console/batches/"+id+"#reversal-"+w.batchReversal.ID.String(), loc)
}

// The transfers page lists the newest first, and its status links narrow it to the transfers
// whose event is at that status (a batch's legs by their batch's event).
func TestTheTransfersPageIsNewestFirstAndFiltersByItsEventsStatus(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	w := makeWorld(t, b.store)
	setOutboxStatus(t, b.pool, w.first.EventID, "dead_letter")
	setOutboxStatus(t, b.pool, w.batch.EventID, "failed")
	br := b.browser(t, b.admin)
	order := func(body string) []string {
		var ids []string
		for _, m := range regexp.MustCompile(`data-transfer="([0-9a-f-]{36})"`).FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}

	status, all, _ := br.get("/console/transfers")
	require.Equal(t, http.StatusOK, status, all)
	ids := order(all)
	require.Len(t, ids, 8, "2 transfers, a reversal, a capture, 2 legs and their 2 reversals")
	require.Equal(t, w.first.ID.String(), ids[len(ids)-1], "the first transfer is last")
	require.Equal(t, w.second.ID.String(), ids[len(ids)-2])
	require.Contains(t, all, `href="/console/transfers?status=dead_letter"`)

	_, dead, _ := br.get("/console/transfers?status=dead_letter")
	require.Equal(t, []string{w.first.ID.String()}, order(dead))
	require.Contains(t, dead, `data-filter="dead_letter" aria-current="page"`)
	_, failed, _ := br.get("/console/transfers?status=failed")
	require.Equal(t, []string{w.batch.Legs[1].ID.String(), w.batch.Legs[0].ID.String()}, order(failed))
	_, pending, _ := br.get("/console/transfers?status=pending")
	require.Len(t, order(pending), 5)
	require.NotContains(t, pending, w.first.ID.String())
	_, open, _ := br.get("/console/transfers?status=unacknowledged")
	require.Len(t, order(open), 8)
	_, done, _ := br.get("/console/transfers?status=acknowledged")
	require.Empty(t, order(done))

	status, _, _ = br.get("/console/transfers?status=lost")
	require.Equal(t, http.StatusBadRequest, status)
}

// The trace's requeue button is there for a key with outbox:admin and no owner, on a failed or
// dead_letter row only; posting it goes through the outbox page's confirmation and audited
// requeue, back to the trace.
func TestTheTracesRequeueButton(t *testing.T) {
	t.Parallel()
	b := setupTrace(t)
	w := makeWorld(t, b.store)
	setOutboxStatus(t, b.pool, w.first.EventID, "dead_letter")
	setOutboxStatus(t, b.pool, w.captured.FinishedEventID, "failed")
	ctx := context.Background()
	_, reader, err := b.keys.Create(ctx, auth.Actor{Name: "test"}, "reader", []auth.Scope{httpapi.ScopeTransfersRead})
	require.NoError(t, err)
	_, owned, err := b.keys.CreateOwned(ctx, auth.Actor{Name: "test"}, "owned", "acme", []auth.Scope{httpapi.ScopeTransfersRead, httpapi.ScopeOutboxAdmin})
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE wallets SET owner = 'acme' WHERE id IN ('mint', 'alice')`)
	require.NoError(t, err)

	const button = "Requeue its outbox row…"
	first := "/console/transfers/" + w.first.ID.String()
	for _, tt := range []struct {
		name, key, path string
		shown           bool
	}{
		{"an admin sees it on a dead letter", b.admin, first, true},
		{"an admin sees it on a hold's failed capture", b.admin, "/console/holds/" + w.captured.ID.String(), true},
		{"an admin does not see it on a pending row", b.admin, "/console/transfers/" + w.second.ID.String(), false},
		{"a key without outbox:admin does not see it", reader, first, false},
		{"a key with an owner does not see it", owned, first, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := b.browser(t, tt.key).get(tt.path)
			require.Equal(t, http.StatusOK, status, body)
			require.Equal(t, tt.shown, strings.Contains(body, button), body)
		})
	}

	br := b.browser(t, b.admin)
	_, page, _ := br.get(first)
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, token)
	require.Contains(t, page, `name="back" value="`+first+`"`)
	form := url.Values{"csrf": {token[1]}, "id": {w.first.EventID.String()}, "back": {first}}
	status, confirm, _ := br.post("/console/outbox/requeue", form)
	require.Equal(t, http.StatusOK, status, confirm)
	require.Contains(t, confirm, "Requeue 1 outbox rows?")
	form.Set("confirm", "yes")
	status, _, loc := br.post("/console/outbox/requeue", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, first, loc, "back to the trace")
	var rowStatus, actor, action string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM outbox WHERE id = $1`, w.first.EventID).Scan(&rowStatus))
	require.Equal(t, "pending", rowStatus)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT actor, action FROM audit_log WHERE target = $1`, w.first.EventID.String()).Scan(&actor, &action))
	require.Equal(t, "outbox.requeue", action)
	_, after, _ := br.get(first)
	require.Contains(t, after, "Requeued 1 of 1 outbox rows.")
	require.NotContains(t, after, button)
}
