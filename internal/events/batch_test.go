package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// recordingHandler applies events by inserting them into a table of the test's database, in the
// consumer's transaction, noting whether they came in a batch of several or alone.
type recordingHandler struct{}

func (recordingHandler) apply(ctx context.Context, tx pgx.Tx, env contract.Envelope, via string) error {
	var data contract.TransferCompleted
	if err := env.DecodeData(&data); err != nil {
		return err
	}
	if err := data.Validate(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO applied (event_id, via) VALUES ($1, $2)", env.ID, via)
	return err
}

func (h recordingHandler) Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	via := "batch"
	if len(envs) == 1 {
		via = "single"
	}
	for _, env := range envs {
		if err := h.apply(ctx, tx, env, via); err != nil {
			return err
		}
	}
	return nil
}

func TestABatchHandlerGetsWholeBatchesAndAPoisonEventFailsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, "CREATE TABLE applied (event_id text PRIMARY KEY, via text NOT NULL)")
	require.NoError(t, err)
	ids := b.addEvents(t, 200)
	relay := b.relay(t, outbox.RelayConfig{BatchSize: 200})
	_, err = relay.DispatchOnce(ctx)
	require.NoError(t, err)
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)
	// A copy of an event under another message id, and an invalid event, among the others.
	row, err := eventsdb.New(b.pool).GetOutbox(ctx, ids[7])
	require.NoError(t, err)
	b.publish(t, contract.SourceWallet, subject, row.Payload, "copy-"+ids[7].String())
	poison := envelopeBody(t, uuid.New(), contract.TransferCompleted{TransferID: "t", FromWalletID: "a", ToWalletID: "b", Amount: -5, Currency: "USD", CreatedAt: time.Now()})
	b.publish(t, contract.SourceWallet, subject, poison, "poison")
	b.addEvents(t, 100)
	_, err = relay.DispatchOnce(ctx)
	require.NoError(t, err)

	cons := b.consumer(t, "gl", recordingHandler{})
	stop := runInBackground(t, cons.Run)
	require.Eventually(t, func() bool {
		s := cons.Stats()
		return s.Processed == 300 && s.Failed == 1 && s.Duplicates == 1
	}, 30*time.Second, 20*time.Millisecond)
	stop()

	var total, viaBatch int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE via = 'batch') FROM applied").Scan(&total, &viaBatch))
	require.Equal(t, 300, total, "every valid event applied once (the primary key would refuse a second)")
	require.Positive(t, viaBatch, "whole batches went to the handler at once")
	failed, err := eventsdb.New(b.pool).GetInbox(ctx, "gl:"+envelopeID(t, poison))
	require.NoError(t, err)
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, contract.ReasonMalformed, *failed.Reason)
	require.Contains(t, *failed.Detail, "amount -5 is not positive")
}
