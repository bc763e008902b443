package events_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// An operator resolves failed events that no retry can apply (a conflict, a forgery): a
// resolve without a reason is refused; with one, the rows become resolved with their failure
// kept, the audit trail records it in the same transaction, the unauthenticated warning of the
// health checks clears, a retry is refused, and a redelivery of the resolved event through the
// real consumer and broker is absorbed as a duplicate, never applied.
func TestAResolvedEventIsNeverAppliedAndLeavesTheChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.addEvents(t, 2)
	_, err := b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)
	unsigned := nats.NewMsg(subject)
	unsigned.Data = envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "made-up", FromWalletID: "a", ToWalletID: "b",
		Amount: 1, Currency: "USD", CreatedAt: time.Now()})
	_, err = b.js.PublishMsg(ctx, unsigned, jetstream.WithMsgID(uuid.NewString()))
	require.NoError(t, err)

	var mu sync.Mutex
	var applied []string
	accept := true
	handler := inbox.HandlerFunc(func(_ context.Context, _ pgx.Tx, env contract.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		if env.ID == ids[0].String() && !accept {
			return contract.Conflict(errors.New("another transfer posted under this id"))
		}
		applied = append(applied, env.ID)
		return nil
	})
	accept = false
	c := b.consumer(t, "gl", handler)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { s := c.Stats(); return s.Processed == 1 && s.Failed == 2 }, 20*time.Second, 20*time.Millisecond)
	stop()
	require.ErrorContains(t, c.Unauthenticated(ctx), "1 events recorded failed as unauthenticated", "the health checks warn")

	ops := admin.New(b.pool)
	failed, err := ops.ListInbox(ctx, contract.StatusFailed, 10)
	require.NoError(t, err)
	require.Len(t, failed, 2)
	var failedIDs []string
	for _, r := range failed {
		require.False(t, contract.Retryable(r.Reason), "%s is no row a retry can apply", r.Reason)
		failedIDs = append(failedIDs, r.ID)
	}
	conflicted := "gl:" + ids[0].String()
	require.Contains(t, failedIDs, conflicted)

	audit := func(ctx context.Context, db database.Executor, action, target string, detail any) error {
		return auth.Audit(ctx, db, auth.Actor{Name: "alice-console"}, action, target, detail)
	}
	_, err = admin.ResolveInboxAudited(ctx, b.pool, audit, "alice-console", "  ", "api", failedIDs...)
	require.ErrorIs(t, err, admin.ErrNoResolution, "a resolve without a reason is refused")
	stats, err := ops.InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), stats.Counts[contract.StatusFailed], "nothing moved")

	out, err := admin.ResolveInboxAudited(ctx, b.pool, audit, "alice-console", "forged and conflicting: reported to security", "api",
		append(failedIDs, "gl:"+ids[1].String(), "gl:no-such-event")...)
	require.NoError(t, err)
	require.ElementsMatch(t, failedIDs, out.IDs)
	require.ElementsMatch(t, []admin.InboxRefusal{{ID: "gl:" + ids[1].String(), Status: contract.StatusProcessed}, {ID: "gl:no-such-event"}}, out.Refused)

	row, err := ops.GetInbox(ctx, conflicted)
	require.NoError(t, err)
	require.Equal(t, contract.StatusResolved, row.Status)
	require.Equal(t, contract.ReasonConflict, row.Reason, "the failure is kept for the record")
	require.Contains(t, row.Detail, "another transfer posted under this id")
	require.NotEmpty(t, row.Payload)
	require.Equal(t, "alice-console", row.ResolvedBy)
	require.Equal(t, "forged and conflicting: reported to security", row.Resolution)
	require.NotNil(t, row.ResolvedAt)

	var action, target, detail string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT action, target, detail::text FROM audit_log WHERE actor = 'alice-console'`).Scan(&action, &target, &detail))
	require.Equal(t, admin.ActionResolve, action)
	require.Contains(t, target, conflicted)
	require.Contains(t, detail, "reported to security")

	stats, err = ops.InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(0), stats.Counts[contract.StatusFailed])
	require.Equal(t, int64(2), stats.Counts[contract.StatusResolved])
	last, err := ops.LastInboxFailure(ctx)
	require.NoError(t, err)
	require.Nil(t, last, "the overview's last failure leaves resolved rows out")
	require.NoError(t, c.Unauthenticated(ctx), "the health checks no longer warn")

	retried := inbox.New("gl", handler).Retry(ctx, b.pool, conflicted)
	require.Len(t, retried, 1)
	require.Contains(t, retried[0].Error, "is resolved", "a resolved event is not retried")

	// The producer publishes the event again (a republish): the consumer, now willing to apply
	// it, takes it as done.
	mu.Lock()
	accept = true
	mu.Unlock()
	payload, err := eventsdb.New(b.pool).GetOutbox(ctx, ids[0])
	require.NoError(t, err)
	b.publish(t, contract.SourceWallet, subject, payload.Payload, "again-"+ids[0].String())
	c = b.consumer(t, "gl", handler)
	stop = runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Duplicates == 1 }, 20*time.Second, 20*time.Millisecond)
	stop()
	mu.Lock()
	require.NotContains(t, applied, ids[0].String(), "a resolved event is never applied")
	mu.Unlock()
	row, err = ops.GetInbox(ctx, conflicted)
	require.NoError(t, err)
	require.Equal(t, contract.StatusResolved, row.Status)
	require.Equal(t, int32(1), row.Duplicates)
	require.True(t, strings.HasPrefix(row.Resolution, "forged"), "the resolution stands")
}
