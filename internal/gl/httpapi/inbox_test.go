package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/metrics"
	"walletgl/internal/web/webtest"
)

// An operator resolves a failed inbox event through the API: refused without a reason; with
// one, the row is resolved with its failure kept and the audit trail names the key and the
// reason; a row that is not failed is refused with its status.
func TestAdminResolvesAFailedInboxEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Ledger: b.ledger, Inbox: b.pool, Guard: b.guard, Metrics: metrics.New("gl"),
	}))
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, payload)
		VALUES ('gl:e-poison', 'gl', 'e-poison', 'TransferCompleted.v1', 'failed', 'malformed', 'not JSON', '\x7b'),
		       ('gl:e-fine', 'gl', 'e-fine', 'TransferCompleted.v1', 'processed', NULL, NULL, NULL)`)
	require.NoError(t, err)
	resolve := func(body string) webtest.Response {
		return webtest.Do(t, http.MethodPost, server.URL+"/v1/admin/inbox/resolve", authtest.Bearer(b.key), body)
	}

	resolve(`{"ids":["gl:e-poison"],"reason":"   "}`).RequireProblem(t, http.StatusBadRequest, "invalid-request")
	var status string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM inbox WHERE id = 'gl:e-poison'`).Scan(&status))
	require.Equal(t, "failed", status, "a resolve without a reason moves nothing")

	res := resolve(`{"ids":["gl:e-poison","gl:e-fine","gl:e-none"],"reason":"sent by a test harness by mistake"}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.JSONEq(t, `{"resolved":["gl:e-poison"],"refused":[{"id":"gl:e-fine","status":"processed"},{"id":"gl:e-none","status":""}]}`, res.Body)

	var reason, by, resolution string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, reason, resolved_by, resolution FROM inbox WHERE id = 'gl:e-poison'`).
		Scan(&status, &reason, &by, &resolution))
	require.Equal(t, []string{"resolved", "malformed", "sent by a test harness by mistake"}, []string{status, reason, resolution})
	require.NotEmpty(t, by)

	var actor, action, target, detail string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT actor, action, target, detail::text FROM audit_log WHERE action = 'inbox.resolve'`).
		Scan(&actor, &action, &target, &detail))
	require.Equal(t, by, actor, "the audit trail names the key")
	require.Equal(t, "gl:e-poison,gl:e-fine,gl:e-none", target)
	require.Contains(t, detail, "sent by a test harness by mistake")
	require.Contains(t, detail, `"via": "api"`)

	res = resolve(`{"ids":["gl:e-poison"],"reason":"again"}`)
	require.JSONEq(t, `{"resolved":[],"refused":[{"id":"gl:e-poison","status":"resolved"}]}`, res.Body, "a resolved row stays as it was resolved")

	_, reader, err := b.keys.Create(ctx, auth.Actor{Name: "test"}, "reader", []auth.Scope{httpapi.ScopeLedgerRead})
	require.NoError(t, err)
	webtest.Do(t, http.MethodPost, server.URL+"/v1/admin/inbox/resolve", authtest.Bearer(reader), `{"ids":["gl:e-poison"],"reason":"x"}`).
		RequireProblem(t, http.StatusForbidden, "forbidden")
}
