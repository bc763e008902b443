package admin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
)

func TestBrowseInboxPagesAStatusAndFilters(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	for i := range 5 {
		reason, detail := "exhausted", fmt.Sprintf("handler failed %d times", i)
		if i == 3 {
			reason, detail = "conflict", "posted with another amount"
		}
		_, err := pool.Exec(ctx, `
			INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, payload, attempts)
			VALUES ($1, 'gl', $2, 'TransferCompleted.v1', 'failed', $3, $4, '{}', 1)`,
			fmt.Sprintf("gl:event-%d", i), fmt.Sprintf("event-%d", i), reason, detail)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO inbox (id, consumer, event_id, event_type, status) VALUES ('gl:done', 'gl', 'done', 'TransferCompleted.v1', 'processed')`)
	require.NoError(t, err)
	a := admin.New(pool)

	first, err := a.BrowseInbox(ctx, admin.Browse{Status: "failed", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"gl:event-0", "gl:event-1"}, inboxIDs(first.Rows))
	require.Equal(t, "gl:event-1", first.Next)
	last, err := a.BrowseInbox(ctx, admin.Browse{Status: "failed", Limit: 2, After: "gl:event-3"})
	require.NoError(t, err)
	require.Equal(t, []string{"gl:event-4"}, inboxIDs(last.Rows))
	require.Empty(t, last.Next, "the last page has no next")

	tests := []struct {
		name, filter string
		want         []string
	}{
		{"a reason word matches its rows", "conflict", []string{"gl:event-3"}},
		{"a piece of the detail matches, in any case", "FAILED 4", []string{"gl:event-4"}},
		{"an event id matches its row", "event-2", []string{"gl:event-2"}},
		{"another status's row does not match", "done", nil},
	}
	for _, tt := range tests {
		page, err := a.BrowseInbox(ctx, admin.Browse{Status: "failed", Filter: tt.filter})
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, inboxIDs(page.Rows), tt.name)
	}

	row, err := a.GetInbox(ctx, "gl:event-3")
	require.NoError(t, err)
	require.Equal(t, "conflict", row.Reason)
	_, err = a.GetInbox(ctx, "gl:nothing")
	require.ErrorIs(t, err, contract.ErrNotFound)
	_, err = a.BrowseInbox(ctx, admin.Browse{Status: "lost"})
	require.ErrorIs(t, err, contract.ErrInvalidStatus)
	_, err = a.BrowseOutbox(ctx, admin.Browse{Status: "dead_letter", After: "not-an-id"})
	require.ErrorIs(t, err, admin.ErrInvalidCursor)
}

func inboxIDs(rows []admin.InboxRow) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}
