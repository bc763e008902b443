package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// A line on a control account of wallets must name its wallet: the database refuses one that
// does not, and gl verify finds one written with the triggers off.
func TestEveryControlAccountLineNamesItsWallet(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	postConsistently(t, pool, "ev-ok", "tr-ok", 100)

	_, err := pool.Exec(ctx, `BEGIN;
		INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
		VALUES ('00000000-0000-7000-8000-0000000000dd', 'ev-nowallet', 'tr-nowallet', 'USD', now());
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
		    ('00000000-0000-7000-8000-0000000000dd', '1010', 'debit', 9, 'USD', 'bank'),
		    ('00000000-0000-7000-8000-0000000000dd', '2010', 'credit', 9, 'USD', NULL);
		COMMIT;`)
	require.ErrorContains(t, err, "a control account of wallets) without a wallet")

	_, err = pool.Exec(ctx, `BEGIN;
		SET LOCAL session_replication_role = replica;
		INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
		VALUES ('00000000-0000-7000-8000-0000000000dd', 'ev-nowallet', 'tr-nowallet', 'USD', now());
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
		    ('00000000-0000-7000-8000-0000000000dd', '1010', 'debit', 9, 'USD', 'bank'),
		    ('00000000-0000-7000-8000-0000000000dd', '2010', 'credit', 9, 'USD', NULL);
		COMMIT;`)
	require.NoError(t, err)
	out, _, err := runGL(t, glEnv(dbURL), "verify")
	require.Error(t, err, out)
	require.Contains(t, out, "  FAIL  every wallet control account equals the sum of its wallets' sub-accounts in every currency: 1 checked, 1 failing\n"+
		"        2010 USD (balance 109, wallets' sub-accounts 100, 1 lines without a wallet)\n")
}

// walletWithMovements is a wallet database holding bank (external), alice and bob, a deposit
// of 10000 from bank to alice, a transfer of 2550 from alice to bob and a withdrawal of 500 from
// bob to bank, with the balances they leave; it returns the transfers' ids.
func walletWithMovements(t *testing.T) (walletURL string, pool *pgxpool.Pool, deposit, transfer, withdrawal string) {
	t.Helper()
	pool, walletURL = envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO wallets (id, currency, allow_negative, balance) VALUES
		('bank', 'USD', true, -9500), ('alice', 'USD', false, 7450), ('bob', 'USD', false, 2050)`)
	require.NoError(t, err)
	deposit, transfer, withdrawal = uuid.NewString(), uuid.NewString(), uuid.NewString()
	for i, tr := range []struct {
		id, from, to string
		amount       int64
	}{{deposit, "bank", "alice", 10000}, {transfer, "alice", "bob", 2550}, {withdrawal, "bob", "bank", 500}} {
		_, err := pool.Exec(ctx, `INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
			VALUES ($1, $2, '\x00', $3, $4, $5, 'USD', gen_random_uuid())`, tr.id, fmt.Sprintf("k%d", i), tr.from, tr.to, tr.amount)
		require.NoError(t, err)
	}
	return walletURL, pool, deposit, transfer, withdrawal
}

// postTransfer writes a TransferCompleted.v2's entry of kind as the poster does: debit account
// debit on wallet from, credit account credit on wallet to.
func postTransfer(t *testing.T, pool *pgxpool.Pool, transferID, kind, debit, credit, from, to string, amount int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var id string
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, description, event_type, kind)
		VALUES (gen_random_uuid(), gen_random_uuid()::text, $1, 'USD', now(), 'transfer ' || $1 || ' from wallet ' || $2 || ' to wallet ' || $3,
		        'TransferCompleted.v2', $4) RETURNING id::text`, transferID, from, to, kind).Scan(&id))
	_, err = tx.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		VALUES ($1::uuid, $2, 'debit', $4, 'USD', $5), ($1::uuid, $3, 'credit', $4, 'USD', $6)`, id, debit, credit, amount, from, to)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

func TestReconcileComparesEveryWalletsBalanceWithItsSubLedger(t *testing.T) {
	t.Parallel()
	walletURL, walletPool, deposit, transfer, withdrawal := walletWithMovements(t)
	env := func(glURL string) map[string]string {
		return map[string]string{"GL_DATABASE_URL": glURL, "GL_RECONCILE_WALLET_DATABASE_URL": walletURL}
	}
	postAll := func(t *testing.T, pool *pgxpool.Pool, skipWithdrawal bool) {
		postTransfer(t, pool, deposit, "deposit", "1010", "2010", "bank", "alice", 10000)
		postTransfer(t, pool, transfer, "transfer", "2010", "2010", "alice", "bob", 2550)
		if !skipWithdrawal {
			postTransfer(t, pool, withdrawal, "withdrawal", "2010", "1010", "bob", "bank", 500)
		}
	}

	t.Run("a GL whose sub-ledgers hold every wallet's figures reconciles", func(t *testing.T) {
		t.Parallel()
		pool, glURL := envtest.MigratedPool(t, "gl")
		postAll(t, pool, false)
		out, _, err := runGL(t, env(glURL), "reconcile")
		require.NoError(t, err, out)
		require.Contains(t, out, "  wallet balances   3 (each balance and held amount against its sub-ledger; 0 movements in flight left out)\n")
		require.Contains(t, out, "verdict: RECONCILED")
	})

	t.Run("a movement the GL has not posted yet is in flight, not a balance difference", func(t *testing.T) {
		t.Parallel()
		pool, glURL := envtest.MigratedPool(t, "gl")
		postAll(t, pool, true)
		out, _, err := runGL(t, env(glURL), "reconcile")
		require.ErrorContains(t, err, "1 differences", out)
		require.Contains(t, out, "MISSING   transfer "+withdrawal)
		require.Contains(t, out, "1 movements in flight left out")
		require.NotContains(t, out, "BALANCE")
	})

	t.Run("a withdrawal posted as the v1 mode did names both wallets", func(t *testing.T) {
		t.Parallel()
		pool, glURL := envtest.MigratedPool(t, "gl")
		postAll(t, pool, true)
		postTransfer(t, pool, withdrawal, "withdrawal", "1010", "2010", "bob", "bank", 500)
		out, _, err := runGL(t, env(glURL), "reconcile")
		require.Error(t, err, out)
		require.Contains(t, out, "BALANCE   wallet bank USD balance: balance 0.00 in the wallet, 5.00 USD in the GL (its sub-accounts of the wallet control accounts)")
		require.Contains(t, out, "BALANCE   wallet bob USD balance: balance 20.50 in the wallet, 25.50 USD in the GL (its sub-accounts of the wallet control accounts)")
	})

	t.Run("a fabricated entry names the wallet it credits", func(t *testing.T) {
		t.Parallel()
		pool, glURL := envtest.MigratedPool(t, "gl")
		postAll(t, pool, false)
		fabricated := uuid.NewString()
		postTransfer(t, pool, fabricated, "deposit", "1010", "2010", "bank", "alice", 999)
		out, _, err := runGL(t, env(glURL), "reconcile", "--json")
		require.ErrorContains(t, err, "2 differences", out)
		var rec struct {
			BalancesCompared bool `json:"balances_compared"`
			WalletBalances   int  `json:"wallet_balances"`
			Differences      []struct {
				Kind       string `json:"kind"`
				TransferID string `json:"transfer_id"`
			} `json:"differences"`
			Balances []struct {
				WalletID string          `json:"wallet_id"`
				Currency string          `json:"currency"`
				Figure   string          `json:"figure"`
				Wallet   json.RawMessage `json:"wallet"`
				GL       json.RawMessage `json:"gl"`
			} `json:"balances"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rec))
		require.True(t, rec.BalancesCompared)
		require.Equal(t, 3, rec.WalletBalances)
		require.Len(t, rec.Differences, 1)
		require.Equal(t, fabricated, rec.Differences[0].TransferID)
		require.Len(t, rec.Balances, 1)
		require.Equal(t, "alice", rec.Balances[0].WalletID)
		require.Equal(t, "USD", rec.Balances[0].Currency)
		require.Equal(t, "balance", rec.Balances[0].Figure)
		require.Equal(t, "7450", string(rec.Balances[0].Wallet))
		require.Equal(t, "8449", string(rec.Balances[0].GL))
	})

	t.Run("a balance changed in the wallet's database is named", func(t *testing.T) {
		pool, glURL := envtest.MigratedPool(t, "gl")
		postAll(t, pool, false)
		// Not parallel: it changes the wallet's database, which the other subtests read.
		t.Cleanup(func() {
			_, _ = walletPool.Exec(context.Background(), `UPDATE wallets SET balance = balance - 1 WHERE id = 'bob'`)
		})
		_, err := walletPool.Exec(context.Background(), `UPDATE wallets SET balance = balance + 1 WHERE id = 'bob'`)
		require.NoError(t, err)
		out, _, err := runGL(t, env(glURL), "reconcile")
		require.ErrorContains(t, err, "1 differences", out)
		require.Contains(t, out, "BALANCE   wallet bob USD balance: balance 20.51 in the wallet, 20.50 USD in the GL")
	})
}
