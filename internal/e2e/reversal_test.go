package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/systemtest"
)

// A transfer and two partial reversals through the real binaries: each reversal is posted as
// an entry that swaps the transfer's lines and names its entry, both APIs show the link both
// ways, every wallet outbox row (the reversals' TransferReversed.v1 too) comes home
// acknowledged, and reconcile and both verify commands agree with the live ledger.
func TestAReversalIsPostedLinkedAcknowledgedAndReconciled(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	resp, err := s.walletAPI.Transfer(ctx, "pay-1", systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: 1000, Currency: "USD"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var tr systemtest.Transfer
	require.NoError(t, resp.Decode(&tr))

	reverse := func(key string, amount int64) systemtest.Response {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfers/"+tr.ID+"/reversal",
			map[string]any{"amount": amount}, map[string]string{"Idempotency-Key": key})
		require.NoError(t, err)
		return resp
	}
	type transferJSON struct {
		ID                 string `json:"id"`
		FromWalletID       string `json:"from_wallet_id"`
		Amount             int64  `json:"amount"`
		ReversesTransferID string `json:"reverses_transfer_id"`
		ReversedAmount     int64  `json:"reversed_amount"`
		Reversals          []struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount"`
		} `json:"reversals"`
	}
	resp = reverse("undo-1", 300)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var first transferJSON
	require.NoError(t, resp.Decode(&first))
	require.Equal(t, tr.ID, first.ReversesTransferID)
	require.Equal(t, "alice", first.FromWalletID)

	replay := reverse("undo-1", 300)
	require.Equal(t, http.StatusCreated, replay.Status)
	require.Equal(t, "true", replay.Header.Get("Idempotency-Replayed"))
	resp = reverse("undo-2", 800)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	require.Contains(t, string(resp.Body), "reversal-exceeds-transfer")
	resp = reverse("undo-3", 700) // the refusal is kept under undo-2
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var second transferJSON
	require.NoError(t, resp.Decode(&second))

	resp, err = s.walletAPI.Do(ctx, http.MethodGet, "/v1/transfers/"+tr.ID, nil, nil)
	require.NoError(t, err)
	var orig transferJSON
	require.NoError(t, resp.Decode(&orig))
	require.Equal(t, int64(1000), orig.ReversedAmount)
	require.Len(t, orig.Reversals, 2)

	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 100*time.Millisecond, "every wallet outbox row, the reversals' included, is acknowledged")
	var reversedRows int
	require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE event_type = 'TransferReversed.v1' AND status = 'acknowledged'").Scan(&reversedRows))
	require.Equal(t, 2, reversedRows)

	type entryJSON struct {
		ID              string   `json:"id"`
		ReversesEntryID string   `json:"reverses_entry_id"`
		ReversedBy      []string `json:"reversed_by"`
		Lines           []struct {
			AccountCode string `json:"account_code"`
			Direction   string `json:"direction"`
			Amount      int64  `json:"amount"`
		} `json:"lines"`
	}
	entriesOf := func(transferID string) entryJSON {
		t.Helper()
		resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+transferID, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Entries []entryJSON `json:"entries"`
		}
		require.NoError(t, resp.Decode(&out))
		require.Len(t, out.Entries, 1, "transfer %s", transferID)
		return out.Entries[0]
	}
	origEntry, firstEntry, secondEntry := entriesOf(tr.ID), entriesOf(first.ID), entriesOf(second.ID)
	require.ElementsMatch(t, []string{firstEntry.ID, secondEntry.ID}, origEntry.ReversedBy, "in posting order, which two workers may swap")
	require.Equal(t, origEntry.ID, firstEntry.ReversesEntryID)
	require.Equal(t, origEntry.ID, secondEntry.ReversesEntryID)
	for _, l := range firstEntry.Lines {
		require.Equal(t, int64(300), l.Amount)
		require.Equal(t, map[string]string{"1010": "credit", "2010": "debit"}[l.AccountCode], l.Direction)
	}

	// The GL counts what it posted by the event's own type.
	resp, err = s.glAPI.Do(ctx, http.MethodGet, "/metrics", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Contains(t, string(resp.Body), `walletgl_consumer_processed_total{event_type="TransferReversed.v1",service="gl"} 2`+"\n")
	require.Contains(t, string(resp.Body), `walletgl_consumer_processed_total{event_type="TransferCompleted.v2",service="gl"} 1`+"\n")

	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL, "WALLET_URL=http://" + s.walletAddr}
	reconciled := fmt.Sprintf("verdict: RECONCILED — %d transfers, %d entries", 3, 3)
	out, err := s.command(t, s.bins.GL, glEnv, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet's API")
	out, err = s.command(t, s.bins.GL, []string{"GL_DATABASE_URL=" + s.glDBURL, "GL_RECONCILE_WALLET_DATABASE_URL=" + s.walletDBURL}, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet database's view")
	out, err = s.command(t, s.bins.GL, glEnv, "verify")
	require.NoError(t, err, out)
	out, err = s.command(t, s.bins.Wallet, []string{"WALLET_DATABASE_URL=" + s.walletDBURL}, "verify")
	require.NoError(t, err, out)

	// The stream replayed into an empty database rebuilds the same ledger, reversals included.
	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       3\n")
	require.Contains(t, out, reconciled)
}
