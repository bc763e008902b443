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
