package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/testenv"
	"walletgl/internal/wallet"
	walletapi "walletgl/internal/wallet/httpapi"
	walletpostgres "walletgl/internal/wallet/postgres"
)

func TestReconcileReportsEachDifferenceFromTheAPIAndTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	walletPool, walletURL := testenv.MigratedPool(t, "wallet")
	glPool, glURL := testenv.MigratedPool(t, "gl")
	store := walletpostgres.NewStore(walletPool, walletpostgres.Options{})
	api := httptest.NewServer(walletapi.NewServer(zerolog.Nop(), store, events.NewAdmin(walletPool), nil))
	t.Cleanup(api.Close)

	for _, w := range []wallet.Wallet{{ID: "bank", Currency: "USD", AllowNegative: true}, {ID: "alice", Currency: "USD"}} {
		_, err := store.CreateWallet(ctx, w)
		require.NoError(t, err)
	}
	var transfers []wallet.Transfer
	for i := range 5 {
		tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{IdempotencyKey: fmt.Sprintf("k%d", i),
			FromWalletID: "bank", ToWalletID: "alice", Amount: int64(100 + i), Currency: "USD"})
		require.NoError(t, err)
		transfers = append(transfers, tr)
	}
	// The GL holds transfers 0..2 correctly, 3 with a wrong amount, nothing for 4, and an entry
	// for a transfer the wallet never made.
	for i, tr := range transfers[:4] {
		amount := tr.Amount
		if i == 3 {
			amount++
		}
		postConsistently(t, glPool, tr.EventID.String(), tr.ID.String(), amount)
	}
	stranger := uuid.NewString()
	postConsistently(t, glPool, uuid.NewString(), stranger, 42)

	sources := map[string]map[string]string{
		"api":      {"GL_DATABASE_URL": glURL, "WALLET_URL": api.URL},
		"database": {"GL_DATABASE_URL": glURL, "WALLET_DATABASE_URL": walletURL},
	}
	for name, env := range sources {
		t.Run("reading the wallet's "+name, func(t *testing.T) {
			out, _, err := runGL(t, env, "reconcile")
			require.ErrorContains(t, err, "3 differences")
			require.Contains(t, out, "MISSING   transfer "+transfers[4].ID.String())
			require.Contains(t, out, "MISMATCH  transfer "+transfers[3].ID.String())
			require.Contains(t, out, "amount 103 in the wallet, debit line of 104 in the GL")
			require.Contains(t, out, "EXTRA     transfer "+stranger)
			require.Contains(t, out, "verdict: NOT RECONCILED — 3 differences")

			out, _, err = runGL(t, env, "reconcile", "--json")
			require.Error(t, err)
			var rec struct {
				Transfers   int `json:"transfers"`
				Entries     int `json:"entries"`
				Differences []struct{ Kind, TransferID string }
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rec))
			require.Equal(t, 5, rec.Transfers)
			require.Equal(t, 5, rec.Entries)
			require.Len(t, rec.Differences, 3)
		})
	}

	// A GL that holds exactly the wallet's postings agrees with it.
	goodPool, goodURL := testenv.MigratedPool(t, "gl")
	for _, tr := range transfers {
		postConsistently(t, goodPool, tr.EventID.String(), tr.ID.String(), tr.Amount)
	}
	out, _, err := runGL(t, map[string]string{"GL_DATABASE_URL": goodURL, "WALLET_URL": api.URL}, "reconcile")
	require.NoError(t, err)
	require.Contains(t, out, "verdict: RECONCILED — 5 transfers, 5 entries")
}
