package console_test

import (
	"context"
	"fmt"
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
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/inbox"
	"walletgl/internal/metrics"
	whttpapi "walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web"
)

// testBundle is a console over a real database with the events and auth migrations, served
// as a service serves it, and the keys it knows.
type testBundle struct {
	srv   *httptest.Server
	pool  *pgxpool.Pool
	keys  *auth.Keys
	admin string // a key with admin
}

func setup(t *testing.T, opts ...func(*console.Events)) *testBundle {
	t.Helper()
	return setupConfig(t, nil, opts...)
}

// setupConfig is setup with configure changing the console's configuration (nil: as it is).
func setupConfig(t *testing.T, configure func(*console.Config), opts ...func(*console.Events)) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "wallet")
	keys, guard, secret := authtest.Key(t, pool, auth.WalletScopes)
	in := inbox.New(events.ConsumerWallet, postgres.NewAcknowledgments()) // as wallet serve's
	ev := console.Events{
		Admin: admin.New(pool), Audit: keys,
		Retry: func(ctx context.Context, ids ...string) []inbox.Retried { return in.Retry(ctx, pool, ids...) },
		Resolve: func(ctx context.Context, by, resolution string, ids []string) (admin.Resolved, error) { // as wallet serve's
			return admin.ResolveInboxAudited(ctx, pool, whttpapi.AuditByKey, by, resolution, "console", ids...)
		},
		View: "outbox:admin", Requeue: "outbox:admin", RetryScope: "inbox:admin",
		MaxAttempts: 10, TracePath: "/console/transfers/",
	}
	for _, opt := range opts {
		opt(&ev)
	}
	cfg := console.Config{Service: "wallet", Guard: guard, Metrics: metrics.New("wallet"), Pages: ev.Pages(), Health: ev.Admin.Health}
	if configure != nil {
		configure(&cfg)
	}
	c, err := console.New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, pool: pool, keys: keys, admin: secret}
}

// browser is a client that keeps cookies and does not follow redirects.
func (b *testBundle) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *testBundle) get(t *testing.T, c *http.Client, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, c, req)
}

func (b *testBundle) post(t *testing.T, c *http.Client, path string, form url.Values, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, c, req)
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *testBundle) login(t *testing.T, c *http.Client, key string) {
	t.Helper()
	a := b.post(t, c, "/console/login", url.Values{"key": {key}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "the page carries a CSRF token")
	return m[1]
}

func insertDeadLetter(t *testing.T, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := pool.Exec(context.Background(), `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error)
		VALUES ($1, 'TransferCompleted.v1', $2, '{"secret":"no"}', 'dead_letter', 10, 'message size exceeds maximum allowed')`,
		id, "transfer-"+id.String())
	require.NoError(t, err)
	return id
}

func TestAWrongKeyIsRefusedWithTheLoginPageAndNoSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	for name, key := range map[string]string{"unknown": "wgl_nothing", "empty": ""} {
		a := b.post(t, c, "/console/login", url.Values{"key": {key}})
		require.Equal(t, http.StatusUnauthorized, a.status, name)
		require.Contains(t, a.body, `id="login-msg"`, name)
		require.Empty(t, a.header.Values("Set-Cookie"), name)
		if key != "" {
			require.NotContains(t, a.body, key, "the key given is not shown back")
		}
	}
	a := b.get(t, c, "/console/")
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/console/login", a.header.Get("Location"))
}

func TestALoginGivesAnOpaqueHttpOnlyStrictCookieAndNeverTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	a := b.post(t, c, "/console/login", url.Values{"key": {b.admin}})
	require.Equal(t, http.StatusSeeOther, a.status)
	cookie := a.header.Get("Set-Cookie")
	require.Contains(t, cookie, "walletgl_console_wallet=")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	require.Contains(t, cookie, "Path=/console/")
	require.NotContains(t, cookie, b.admin)

	page := b.get(t, c, "/console/")
	require.Equal(t, http.StatusOK, page.status)
	require.NotContains(t, page.body, b.admin)
	require.Contains(t, page.header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "no-store", page.header.Get("Cache-Control"))

	// The script's poll gets the live part alone, and a 401 once the session is gone.
	part := b.get(t, c, "/console/", "X-Console-Fragment", "1")
	require.Equal(t, http.StatusOK, part.status)
	require.NotContains(t, part.body, "<html")
	require.Contains(t, part.body, "Outbox rows by status")

	out := b.post(t, c, "/console/logout", url.Values{"csrf": {csrfOf(t, page.body)}})
	require.Equal(t, http.StatusSeeOther, out.status)
	require.Equal(t, http.StatusUnauthorized, b.get(t, c, "/console/pipeline", "X-Console-Fragment", "1").status)
}

func TestARevokedKeyEndsItsSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k, secret, err := b.keys.Create(context.Background(), auth.Actor{Name: "test"}, "short-lived", []auth.Scope{"outbox:admin"})
	require.NoError(t, err)
	c := b.browser(t)
	b.login(t, c, secret)
	require.Equal(t, http.StatusOK, b.get(t, c, "/console/").status)
	_, err = b.keys.Revoke(context.Background(), auth.Actor{Name: "test"}, k.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the keys' cache trusts a lookup for 2 s
		a := b.get(t, c, "/console/")
		return a.status == http.StatusSeeOther && strings.HasPrefix(a.header.Get("Location"), "/console/login")
	}, 10*time.Second, 200*time.Millisecond)
}

func TestAKeyWithoutTheScopeIsForbiddenToLookAndToAct(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, secret, err := b.keys.Create(context.Background(), auth.Actor{Name: "test"}, "reader", []auth.Scope{"transfers:read"})
	require.NoError(t, err)
	id := insertDeadLetter(t, b.pool)
	c := b.browser(t)
	b.login(t, c, secret)
	a := b.get(t, c, "/console/outbox?status=dead_letter")
	require.Equal(t, http.StatusForbidden, a.status)
	require.Contains(t, a.body, "outbox:admin")
	page := b.get(t, c, "/console/login") // a live session goes to the console: no token there
	require.Equal(t, http.StatusSeeOther, page.status)
	errPage := b.get(t, c, "/console/outbox/"+id.String())
	a = b.post(t, c, "/console/outbox/requeue", url.Values{"csrf": {csrfOf(t, errPage.body)}, "id": {id.String()}, "confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, a.status)
	requireStatus(t, b.pool, id, "dead_letter")
	a = b.post(t, c, "/console/inbox/retry", url.Values{"csrf": {csrfOf(t, errPage.body)}, "id": {"wallet:x"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, a.status)
	require.Contains(t, a.body, "inbox:admin")
}

func TestARequeueNeedsTheSessionsTokenAndAConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := insertDeadLetter(t, b.pool)
	c := b.browser(t)
	b.login(t, c, b.admin)
	page := b.get(t, c, "/console/outbox/"+id.String())
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, "Requeue this row")
	token := csrfOf(t, page.body)

	tests := []struct {
		name   string
		form   url.Values
		header []string
	}{
		{"a form without the token is refused", url.Values{"id": {id.String()}, "confirm": {"yes"}}, nil},
		{"a form with another token is refused", url.Values{"csrf": {"forged"}, "id": {id.String()}, "confirm": {"yes"}}, nil},
		{"a form sent from another site is refused", url.Values{"csrf": {token}, "id": {id.String()}, "confirm": {"yes"}}, []string{"Origin", "https://evil.example"}},
	}
	for _, tt := range tests {
		a := b.post(t, c, "/console/outbox/requeue", tt.form, tt.header...)
		require.Equal(t, http.StatusForbidden, a.status, tt.name)
		requireStatus(t, b.pool, id, "dead_letter")
	}

	confirm := b.post(t, c, "/console/outbox/requeue", url.Values{"csrf": {token}, "id": {id.String()}, "back": {"/console/outbox/" + id.String()}})
	require.Equal(t, http.StatusOK, confirm.status)
	require.Contains(t, confirm.body, "Requeue 1 outbox rows?")
	requireStatus(t, b.pool, id, "dead_letter")

	done := b.post(t, c, "/console/outbox/requeue", url.Values{"csrf": {token}, "id": {id.String()}, "confirm": {"yes"},
		"back": {"https://evil.example/"}}, "Origin", b.srv.URL)
	require.Equal(t, http.StatusSeeOther, done.status)
	require.Equal(t, "/console/outbox", done.header.Get("Location"), "a form returns only within the console")
	requireStatus(t, b.pool, id, "pending")
	after := b.get(t, c, "/console/outbox?status=dead_letter")
	require.Contains(t, after.body, "Requeued 1 of 1 outbox rows.")

	var actor, action string
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT actor, action FROM audit_log WHERE target = $1", id.String()).Scan(&actor, &action))
	require.Equal(t, []string{"test", "outbox.requeue"}, []string{actor, action})
}

func TestErrorPagesSayWhatWasRefusedAndNothingInternal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	b.login(t, c, b.admin)
	a := b.get(t, c, "/console/outbox?status=lost")
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Contains(t, a.body, "invalid status")
	a = b.get(t, c, "/console/outbox?status=dead_letter&after=nope")
	require.Equal(t, http.StatusBadRequest, a.status)
	a = b.get(t, c, "/console/no-such-page")
	require.Equal(t, http.StatusNotFound, a.status)
	a = b.get(t, c, "/console/outbox/"+uuid.NewString())
	require.Equal(t, http.StatusNotFound, a.status)

	b.pool.Close() // the database goes away: the page says so without the driver's words
	a = b.get(t, c, "/console/")
	require.GreaterOrEqual(t, a.status, 500)
	require.NotContains(t, a.body, "postgres")
	require.NotContains(t, a.body, "pool")
}

func TestTheListsPageAndFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := make([]uuid.UUID, 0, 60)
	for range 60 {
		ids = append(ids, insertDeadLetter(t, b.pool))
	}
	c := b.browser(t)
	b.login(t, c, b.admin)
	first := b.get(t, c, "/console/outbox?status=dead_letter")
	require.Equal(t, http.StatusOK, first.status)
	require.Contains(t, first.body, "50 dead_letter rows")
	require.Contains(t, first.body, ids[49].String())
	require.NotContains(t, first.body, ids[50].String())
	next := regexp.MustCompile(`href="(/console/outbox\?after=[^"]+)" rel="next"`).FindStringSubmatch(first.body)
	require.NotNil(t, next)
	second := b.get(t, c, strings.ReplaceAll(next[1], "&amp;", "&"))
	require.Contains(t, second.body, "10 dead_letter rows")
	require.Contains(t, second.body, ids[59].String())

	one := b.get(t, c, "/console/outbox?status=dead_letter&q=transfer-"+ids[7].String())
	require.Contains(t, one.body, "1 dead_letter rows")
	require.Contains(t, one.body, ids[7].String())
}

func requireStatus(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, want string) {
	t.Helper()
	row, err := admin.New(pool).GetOutbox(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, row.Status)
}

func TestAFailedInboxEventIsRetriedWithTheServicesHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := insertDeadLetter(t, b.pool)
	ackID := uuid.Must(uuid.NewV7()).String()
	payload := fmt.Sprintf(`{"specversion":"1.0","id":%q,"source":"gl","type":"TransferPosted.v1","time":"2026-11-30T12:00:00Z",`+
		`"datacontenttype":"application/json","data":{"transfer_id":"t-1","source_event_id":%q,"entry_id":"e-1","posted_at":"2026-11-30T12:00:00Z"}}`, ackID, row)
	inboxID := events.ConsumerWallet + ":" + ackID
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, payload, attempts)
		VALUES ($1, $2, $3, 'TransferPosted.v1', 'failed', 'exhausted', 'database said no', $4, 10)`,
		inboxID, events.ConsumerWallet, ackID, []byte(payload))
	require.NoError(t, err)

	c := b.browser(t)
	b.login(t, c, b.admin)
	page := b.get(t, c, "/console/inbox/"+inboxID)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, "exhausted")
	require.Contains(t, page.body, "source_event_id", "the raw payload is shown")
	form := url.Values{"csrf": {csrfOf(t, page.body)}, "id": {inboxID}, "back": {"/console/inbox/" + inboxID}}
	confirm := b.post(t, c, "/console/inbox/retry", form)
	require.Equal(t, http.StatusOK, confirm.status)
	require.Contains(t, confirm.body, "Retry 1 failed inbox events?")
	form.Set("confirm", "yes")
	done := b.post(t, c, "/console/inbox/retry", form)
	require.Equal(t, http.StatusSeeOther, done.status)
	after := b.get(t, c, done.header.Get("Location"))
	require.Contains(t, after.body, "Processed 1 of 1 events.")
	require.Contains(t, after.body, `data-field="status">processed<`)
	requireStatus(t, b.pool, row, "acknowledged")
}

// A filter holding a NUL (which PostgreSQL refuses in text) is refused 400 as a problem before
// the page's query runs, not answered 500.
func TestAFilterHoldingANulIsRefused400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	b.login(t, c, b.admin)
	a := b.get(t, c, "/console/outbox?q=%00")
	require.Equal(t, http.StatusBadRequest, a.status, a.body)
	require.Equal(t, web.ContentTypeProblem, a.header.Get("Content-Type"))
	require.Contains(t, a.body, web.TypeBase+"invalid-query")
}
