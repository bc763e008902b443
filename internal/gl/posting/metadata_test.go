package posting_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/posting"
	"walletgl/internal/metadata"
)

// withMetadata is env, a TransferCompleted.v2, with its data's metadata set to m.
func withMetadata(t *testing.T, env contract.Envelope, m metadata.Metadata) contract.Envelope {
	t.Helper()
	var data contract.TransferCompleted
	require.NoError(t, json.Unmarshal(env.Data, &data))
	data.Metadata = m
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	env.Data = raw
	return env
}

func TestTransferMetadataIsStoredOnItsEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	order := metadata.Metadata{"order_id": "123", "shop.region": "eu-1 ✓"}

	tagged := newTransferID()
	env := withMetadata(t, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindTransfer, tagged, 300, at), order)
	require.NoError(t, b.handle(t, h, env))
	require.Equal(t, order, linesOf(t, b, tagged).Metadata)

	plain := newTransferID()
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindTransfer, plain, 300, at)))
	require.Empty(t, linesOf(t, b, plain).Metadata)

	t.Run("the listing filters entries by containment", func(t *testing.T) {
		page, err := b.ledger.Entries(context.Background(), gl.EntryQuery{Metadata: metadata.Metadata{"order_id": "123"}})
		require.NoError(t, err)
		require.Len(t, page.Entries, 1)
		require.Equal(t, tagged, page.Entries[0].TransferID)
		page, err = b.ledger.Entries(context.Background(), gl.EntryQuery{Metadata: metadata.Metadata{"order_id": "123", "shop.region": "us"}})
		require.NoError(t, err)
		require.Empty(t, page.Entries, "every pair must match")
	})
	t.Run("the same event again with other metadata is a conflict, not a copy", func(t *testing.T) {
		forged := withMetadata(t, env, metadata.Metadata{"order_id": "999"}) // the same event id
		require.ErrorIs(t, b.handle(t, h, forged), contract.ErrConflict)
		require.Equal(t, order, linesOf(t, b, tagged).Metadata)
	})
	t.Run("an event with metadata that breaks a rule is malformed", func(t *testing.T) {
		bad := withMetadata(t, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindTransfer, newTransferID(), 300, at),
			metadata.Metadata{"order id": "1"})
		require.ErrorIs(t, b.handle(t, h, bad), contract.ErrMalformed)
	})
}

// withDataMetadata is env with its data's metadata member set to m, whatever its type.
func withDataMetadata(t *testing.T, env contract.Envelope, m metadata.Metadata) contract.Envelope {
	t.Helper()
	var data map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(env.Data, &data))
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	data["metadata"] = raw
	if env.Data, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestHoldAndReversalMetadataAreStoredOnTheirEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	ctx := context.Background()
	order := metadata.Metadata{"order_id": "h-123"}

	holdID := newHoldID()
	placed := withDataMetadata(t, holdPlaced(t, holdID, "w-1", 1000, "USD"), order)
	require.NoError(t, b.handle(t, h, placed))
	require.Equal(t, order, linesOf(t, b, gl.HoldPlacedKey(holdID)).Metadata, "the placement's entry")
	require.NoError(t, b.handle(t, h, holdVoided(t, holdID, "w-1", 1000, "USD", contract.VoidRequested)))
	require.Empty(t, linesOf(t, b, gl.HoldReleasedKey(holdID)).Metadata, "the release's entry has none")
	plainHold := newHoldID()
	require.NoError(t, b.handle(t, h, holdPlaced(t, plainHold, "w-1", 5, "USD")))
	require.Empty(t, linesOf(t, b, gl.HoldPlacedKey(plainHold)).Metadata)

	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	transferID, reversalID, plainReversal := newTransferID(), newTransferID(), newTransferID()
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindTransfer, transferID, 300, at)))
	chargeback := metadata.Metadata{"case": "cb-9"}
	reversed := withDataMetadata(t, transferReversed(t, reversalID, transferID, 100, "USD"), chargeback)
	require.NoError(t, b.handle(t, h, reversed))
	require.Equal(t, chargeback, linesOf(t, b, reversalID).Metadata, "the reversal's own metadata")
	require.NoError(t, b.handle(t, h, transferReversed(t, plainReversal, transferID, 100, "USD")))
	require.Empty(t, linesOf(t, b, plainReversal).Metadata)

	t.Run("the listing finds the hold's and the reversal's entries", func(t *testing.T) {
		page, err := b.ledger.Entries(ctx, gl.EntryQuery{Metadata: order})
		require.NoError(t, err)
		require.Len(t, page.Entries, 1)
		require.Equal(t, holdID, page.Entries[0].HoldID)
		page, err = b.ledger.Entries(ctx, gl.EntryQuery{Metadata: chargeback})
		require.NoError(t, err)
		require.Len(t, page.Entries, 1)
		require.Equal(t, reversalID, page.Entries[0].TransferID)
	})
	t.Run("the same events again with other metadata are conflicts", func(t *testing.T) {
		require.ErrorIs(t, b.handle(t, h, withDataMetadata(t, reversed, metadata.Metadata{"case": "cb-10"})), contract.ErrConflict)
		require.Equal(t, chargeback, linesOf(t, b, reversalID).Metadata)
	})
	t.Run("events with metadata that break a rule are malformed", func(t *testing.T) {
		bad := metadata.Metadata{"a b": "1"}
		require.ErrorIs(t, b.handle(t, h, withDataMetadata(t, holdPlaced(t, newHoldID(), "w-1", 5, "USD"), bad)), contract.ErrMalformed)
		require.ErrorIs(t, b.handle(t, h, withDataMetadata(t, transferReversed(t, newTransferID(), transferID, 1, "USD"), bad)), contract.ErrMalformed)
	})
}
