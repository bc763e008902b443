package inbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
)

func TestRetryInboxProcessesAFailedEventOnceAndLeavesABadOneFailed(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	q := eventsdb.New(pool)
	goodID, badID := uuid.New(), uuid.New()
	good := envelopeBody(t, goodID, contract.TransferCompleted{TransferID: "t-1", FromWalletID: "a", ToWalletID: "b", Amount: 5, Currency: "USD", CreatedAt: time.Now()})
	bad := envelopeBody(t, badID, contract.TransferCompleted{TransferID: "t-2", FromWalletID: "a", ToWalletID: "b", Amount: 0, Currency: "USD", CreatedAt: time.Now()})
	for id, body := range map[uuid.UUID][]byte{goodID: good, badID: bad} {
		require.NoError(t, q.RecordInboxFailure(ctx, eventsdb.RecordInboxFailureParams{
			ID: "gl:" + id.String(), Consumer: "gl", EventID: id.String(), EventType: contract.TypeTransferCompleted,
			Reason: contract.ReasonExhausted, Detail: "handler failed on 10 deliveries", Payload: body, Attempts: 10,
		}))
	}
	handled := map[string]int{}
	// The handler writes in the transaction it is given, as the GL's poster does: if the retry
	// rolled back, the write must be gone too.
	handler := inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		var data contract.TransferCompleted
		if err := env.DecodeData(&data); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, event_type, aggregate_id, payload) VALUES ($1, 'TransferPosted.v1', $2, '{}')`, uuid.New(), data.TransferID); err != nil {
			return err
		}
		if err := data.Validate(); err != nil {
			return err
		}
		handled[env.ID]++
		return nil
	})

	out := inbox.New("gl", handler).Retry(ctx, pool, goodID.String(), "gl:"+badID.String(), "gl:missing")
	require.Len(t, out, 3)
	require.Equal(t, inbox.Retried{ID: "gl:" + goodID.String()}, out[0])
	require.Contains(t, out[1].Error, "amount 0 is not positive")
	require.Contains(t, out[2].Error, "not found")

	row, err := q.GetInbox(ctx, "gl:"+goodID.String())
	require.NoError(t, err)
	require.Equal(t, "processed", row.Status)
	require.Equal(t, int32(11), row.Attempts)
	row, err = q.GetInbox(ctx, "gl:"+badID.String())
	require.NoError(t, err)
	require.Equal(t, "failed", row.Status, "a retry that fails again rolls back")
	require.Equal(t, int32(10), row.Attempts)
	var acks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id IN ('t-1', 't-2')`).Scan(&acks))
	require.Equal(t, 1, acks, "only the good event's write committed")

	again := inbox.New("gl", handler).Retry(ctx, pool, goodID.String())
	require.Contains(t, again[0].Error, "is processed, only a failed or waiting event is retried")
	require.Equal(t, 1, handled[goodID.String()], "a processed event is never handled again")
}

// envelopeBody is the message body of a TransferCompleted.v1 event id with data.
func envelopeBody(t *testing.T, id uuid.UUID, data any) []byte {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	body, err := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: id.String(), Source: "wallet",
		Type: contract.TypeTransferCompleted, Time: time.Now(), DataContentType: "application/json", Data: raw})
	require.NoError(t, err)
	return body
}
