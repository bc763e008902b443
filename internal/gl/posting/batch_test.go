package posting_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl/posting"
)

func (b *testBundle) handleBatch(t *testing.T, h inbox.Handler, envs []contract.Envelope) error {
	t.Helper()
	return database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		return h.Handle(context.Background(), tx, envs)
	})
}

func TestABatchPostsOneEntryPerTransferAndAcknowledgesEveryEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poster := posting.New(b.ledger, zerolog.Nop())
	ctx := context.Background()

	earlier := transferCompleted(t, newTransferID(), 500, "USD")
	require.NoError(t, b.handle(t, poster, earlier))

	var envs []contract.Envelope
	for range 20 {
		envs = append(envs, transferCompleted(t, newTransferID(), 100, "USD"))
	}
	// The earlier event again, past the inbox: a copy, acknowledged again.
	envs = append(envs, earlier)

	require.NoError(t, b.handleBatch(t, poster, envs))

	var entries, lines int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM journal_entries), (SELECT count(*) FROM journal_lines)").Scan(&entries, &lines))
	require.Equal(t, 1+20, entries, "one entry per transfer")
	require.Equal(t, 2*entries, lines)
	acks := b.acknowledgments(t)
	require.Len(t, acks, 1+len(envs), "every event is acknowledged, the copy included")
	require.Len(t, b.acknowledgmentEvents(t), 2, "one acknowledgment per batch: the earlier event's and this batch's")
	require.Equal(t, acks[0].EntryID, acks[len(acks)-1].EntryID, "a copy's acknowledgment names the stored entry")

	// Another event for a transfer posted before, or two events for one transfer in a batch:
	// a conflict that fails the batch and writes nothing (the consumer then handles each alone).
	var again contract.TransferCompleted
	require.NoError(t, earlier.DecodeData(&again))
	twin := transferCompleted(t, newTransferID(), 7, "EUR")
	var twinData contract.TransferCompleted
	require.NoError(t, twin.DecodeData(&twinData))
	for name, batch := range map[string][]contract.Envelope{
		"another event for a posted transfer": {transferCompleted(t, newTransferID(), 100, "USD"), transferCompleted(t, again.TransferID, 500, "USD")},
		"two events for one transfer":         {twin, transferCompleted(t, twinData.TransferID, 7, "EUR")},
	} {
		require.ErrorIs(t, b.handleBatch(t, poster, batch), contract.ErrConflict, name)
	}
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries))
	require.Equal(t, 1+20, entries, "nothing written")
}

func TestABatchWithAnInvalidEventWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poster := posting.New(b.ledger, zerolog.Nop())
	envs := []contract.Envelope{
		transferCompleted(t, newTransferID(), 100, "USD"),
		transferCompleted(t, newTransferID(), 0, "USD"),
	}
	err := b.handleBatch(t, poster, envs)
	require.True(t, errors.Is(err, contract.ErrMalformed), "got %v", err)
	var entries int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM journal_entries").Scan(&entries))
	require.Zero(t, entries)
	require.Empty(t, b.acknowledgments(t))
}

// A batch larger than one acknowledgment may name (EVENTS_BATCH_SIZE has no upper bound) is
// acknowledged by several, each within the limit the wallet accepts, naming every event once.
func TestABatchLargerThanOneAcknowledgmentIsAcknowledgedBySeveral(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poster := posting.New(b.ledger, zerolog.Nop())
	envs := make([]contract.Envelope, contract.MaxPostingsPerEvent+1)
	for i := range envs {
		envs[i] = transferCompleted(t, newTransferID(), 1, "USD")
	}
	require.NoError(t, b.handleBatch(t, poster, envs))

	acks := b.acknowledgmentEvents(t)
	require.Len(t, acks, 2)
	named := map[string]bool{}
	for _, postings := range acks {
		require.LessOrEqual(t, len(postings), contract.MaxPostingsPerEvent)
		for _, p := range postings {
			require.False(t, named[p.SourceEventID], "event %s acknowledged twice", p.SourceEventID)
			named[p.SourceEventID] = true
		}
	}
	require.Len(t, named, len(envs))
}
