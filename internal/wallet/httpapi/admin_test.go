package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/web/openapitest"
)

// outboxRow writes an outbox row straight into status, as the relay would have left it.
func (b *testBundle) outboxRow(t *testing.T, status string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error, acknowledged_at)
		VALUES ($1, 'TransferCompleted.v1', $2, '{}', $3, 10, 'broker refused',
		        CASE WHEN $3 = 'acknowledged' THEN now() END)`, id, "t-"+id.String(), status)
	require.NoError(t, err)
	return id
}

func TestAdminOutbox(t *testing.T) {
	t.Parallel()
	// The subtests run in order: the last one changes what the others read.
	b := setup(t) // its one transfer left one pending row
	dead := []uuid.UUID{b.outboxRow(t, "dead_letter"), b.outboxRow(t, "dead_letter")}
	b.outboxRow(t, "failed")
	acked := b.outboxRow(t, "acknowledged")

	t.Run("without a status it answers the stats of every status", func(t *testing.T) {
		res := b.do(t, http.MethodGet, "/v1/admin/outbox", nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var stats struct {
			Counts               map[string]int64 `json:"counts"`
			OldestPendingAgeSecs float64          `json:"oldest_pending_age_seconds"`
			OldestPendingAt      *string          `json:"oldest_pending_at"`
		}
		res.Decode(t, &stats)
		require.Equal(t, map[string]int64{"pending": 1, "dispatching": 0, "dispatched": 0, "acknowledged": 1, "failed": 1, "dead_letter": 2}, stats.Counts)
		require.NotNil(t, stats.OldestPendingAt)
	})
	t.Run("with a status it lists that status's rows up to the limit", func(t *testing.T) {
		res := b.do(t, http.MethodGet, "/v1/admin/outbox?status=dead_letter&limit=1", nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var list struct {
			Status string `json:"status"`
			Rows   []struct {
				ID        string `json:"id"`
				Status    string `json:"status"`
				LastError string `json:"last_error"`
			} `json:"rows"`
		}
		res.Decode(t, &list)
		require.Len(t, list.Rows, 1)
		require.Equal(t, dead[0].String(), list.Rows[0].ID)
		require.Equal(t, "broker refused", list.Rows[0].LastError)
	})
	for path, slug := range map[string]string{
		"/v1/admin/outbox?status=lost": "invalid-request", "/v1/admin/outbox?status=failed&limit=0": "invalid-limit",
		"/v1/admin/outbox?status=failed&limit=x": "invalid-limit", "/v1/admin/outbox?status=fai%led": "invalid-query",
	} {
		t.Run(fmt.Sprintf("%s is a bad request", path), func(t *testing.T) {
			b.do(t, http.MethodGet, path, openapitest.Invalid(nil, "a bad query string"), "").
				RequireProblem(t, http.StatusBadRequest, slug)
		})
	}
	t.Run("requeue by ids moves failed rows and refuses the others", func(t *testing.T) {
		res := b.do(t, http.MethodPost, "/v1/admin/outbox/requeue", nil,
			fmt.Sprintf(`{"ids":[%q,%q]}`, dead[0], acked))
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		require.JSONEq(t, fmt.Sprintf(`{"requeued":[%q],"refused":[{"id":%q,"status":"acknowledged"}]}`, dead[0], acked), res.Body)
	})
}

func TestAdminRequeueByStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failed := b.outboxRow(t, "failed")
	b.outboxRow(t, "dead_letter")

	res := b.do(t, http.MethodPost, "/v1/admin/outbox/requeue", nil, `{"status":"failed"}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.JSONEq(t, fmt.Sprintf(`{"requeued":[%q]}`, failed), res.Body)

	var status string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status FROM outbox WHERE id = $1`, failed).Scan(&status))
	require.Equal(t, "pending", status)

	res = b.do(t, http.MethodPost, "/v1/admin/outbox/requeue", nil, `{"status":"failed"}`)
	require.JSONEq(t, `{"requeued":[]}`, res.Body, "nothing left to move")
}

func TestAdminRequeueRefusesBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, body := range map[string]string{
		"a pending status":         `{"status":"pending"}`,
		"an acknowledged status":   `{"status":"acknowledged"}`,
		"an id that is not a UUID": `{"ids":["nope"]}`,
		"both ids and a status":    fmt.Sprintf(`{"ids":[%q],"status":"failed"}`, uuid.New()),
		"neither ids nor a status": `{}`,
		"an unknown field":         `{"everything":true}`,
	} {
		t.Run(name+" is a bad request", func(t *testing.T) {
			t.Parallel()
			b.do(t, http.MethodPost, "/v1/admin/outbox/requeue", openapitest.Invalid(nil, name), body).
				RequireProblem(t, http.StatusBadRequest, "invalid-request")
		})
	}
}
