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

// A wallet spending into its credit line and a forced reversal (a chargeback) taking a
// customer's wallet below zero, through the real binaries: the GL posts both as usual, and
// reconcile, both verify commands and a replay agree with the wallets.
func TestACreditLineAndAForcedReversalArePostedAndReconciled(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()
	do := func(method, path string, body any, key string) systemtest.Response {
		t.Helper()
		var h map[string]string
		if key != "" {
			h = map[string]string{"Idempotency-Key": key}
		}
		resp, err := s.walletAPI.Do(ctx, method, path, body, h)
		require.NoError(t, err)
		return resp
	}
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	resp := do(http.MethodPost, "/v1/wallets", map[string]any{"id": "alice", "currency": "USD", "min_balance": -200}, "")
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bob", "USD", false))
	transfer := func(key, from, to string, amount int64) systemtest.Transfer {
		t.Helper()
		resp, err := s.walletAPI.Transfer(ctx, key, systemtest.TransferRequest{FromWalletID: from, ToWalletID: to, Amount: amount, Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var tr systemtest.Transfer
		require.NoError(t, resp.Decode(&tr))
		return tr
	}
	transfer("deposit", "bank", "alice", 300)
	pay := transfer("pay", "alice", "bob", 500) // alice at her minimum, -200
	transfer("withdraw", "bob", "bank", 450)    // bob keeps 50

	resp = do(http.MethodPost, "/v1/transfers/"+pay.ID+"/reversal", map[string]any{"amount": 500}, "undo")
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	resp = do(http.MethodPost, "/v1/transfers/"+pay.ID+"/reversal", map[string]any{"amount": 500, "force": true}, "chargeback")
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	resp = do(http.MethodGet, "/v1/wallets/bob", nil, "")
	var bob struct {
		Balance      int64 `json:"balance"`
		BelowMinimum int64 `json:"below_minimum"`
	}
	require.NoError(t, resp.Decode(&bob))
	require.Equal(t, int64(-450), bob.Balance)
	require.Equal(t, int64(450), bob.BelowMinimum)

	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 100*time.Millisecond, "every wallet outbox row, the chargeback's included, is acknowledged")

	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL, "WALLET_URL=http://" + s.walletAddr}
	reconciled := fmt.Sprintf("verdict: RECONCILED — %d transfers, %d entries", 4, 4)
	out, err := s.command(t, s.bins.GL, glEnv, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled)
	out, err = s.command(t, s.bins.GL, glEnv, "verify")
	require.NoError(t, err, out)
	out, err = s.command(t, s.bins.Wallet, []string{"WALLET_DATABASE_URL=" + s.walletDBURL}, "verify")
	require.NoError(t, err, out)
	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       4\n")
	require.Contains(t, out, reconciled)
}
