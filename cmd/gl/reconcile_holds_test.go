package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
)

// postHoldEntry writes a hold's placement or release (key) on wallet alice to the GL as the
// poster does.
func postHoldEntry(t *testing.T, pool *pgxpool.Pool, holdID, key string, amount int64, debit, credit string) {
	t.Helper()
	ctx := context.Background()
	eventID := uuid.NewString()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
		VALUES ('gl:' || $1::text, 'gl', $1::text, 'HoldPlaced.v1', 'processed', 1, now())`, eventID)
	require.NoError(t, err)
	var id string
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO journal_entries (id, event_id, transfer_id, hold_id, currency, occurred_at)
		VALUES (gen_random_uuid(), $1, $2, $3, 'USD', now()) RETURNING id::text`, eventID, key, holdID).Scan(&id))
	_, err = tx.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		VALUES ($1::uuid, $2, 'debit', $4, 'USD', 'alice'), ($1::uuid, $3, 'credit', $4, 'USD', 'alice')`, id, debit, credit, amount)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// startHoldsAPI stands in for the wallet's API with no transfers and these holds
// (GET /v1/holds in one page, GET /v1/holds/{id}).
func startHoldsAPI(t *testing.T, holds []gl.SourceHold) string {
	t.Helper()
	type holdJSON struct {
		ID       string `json:"id"`
		WalletID string `json:"wallet_id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Status   string `json:"status"`
	}
	encode := func(rw http.ResponseWriter, v any) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/transfers", func(rw http.ResponseWriter, r *http.Request) {
		encode(rw, map[string]any{"transfers": []any{}, "next_cursor": nil})
	})
	mux.HandleFunc("GET /v1/holds", func(rw http.ResponseWriter, r *http.Request) {
		page := []holdJSON{}
		for _, h := range holds {
			page = append(page, holdJSON{h.ID, h.WalletID, h.Amount, h.Currency, h.Status})
		}
		encode(rw, map[string]any{"holds": page, "next_cursor": nil})
	})
	mux.HandleFunc("GET /v1/holds/{id}", func(rw http.ResponseWriter, r *http.Request) {
		for _, h := range holds {
			if h.ID == r.PathValue("id") {
				encode(rw, holdJSON{h.ID, h.WalletID, h.Amount, h.Currency, h.Status})
				return
			}
		}
		http.Error(rw, `{"type":"hold-not-found"}`, http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReconcileComparesEachHoldFromTheAPIAndTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	glPool, glURL := envtest.MigratedPool(t, "gl")
	walletPool, walletURL := envtest.MigratedPool(t, "wallet")
	_, err := walletPool.Exec(ctx, `INSERT INTO wallets (id, currency, allow_negative, held) VALUES ('alice', 'USD', true, 100)`)
	require.NoError(t, err)
	pending, voided, stranger := uuid.NewString(), uuid.NewString(), uuid.NewString()
	_, err = walletPool.Exec(ctx, `INSERT INTO holds (id, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id)
		VALUES ($1, 'h-1', '\x00', 'alice', 100, 'USD', now() + interval '1 hour', gen_random_uuid())`, pending)
	require.NoError(t, err)
	_, err = walletPool.Exec(ctx, `INSERT INTO holds (id, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id,
		status, void_reason, finished_event_id, finished_at)
		VALUES ($1, 'h-2', '\x00', 'alice', 40, 'USD', now() + interval '1 hour', gen_random_uuid(), 'voided', 'expired', gen_random_uuid(), now())`, voided)
	require.NoError(t, err)
	holds := []gl.SourceHold{
		{ID: pending, WalletID: "alice", Amount: 100, Currency: "USD", Status: gl.HoldPending},
		{ID: voided, WalletID: "alice", Amount: 40, Currency: "USD", Status: gl.HoldVoided},
	}
	apiURL := startHoldsAPI(t, holds)

	// The GL has the pending hold's placement, the voided hold's placement without its
	// release (its HoldVoided still in flight), and a placement of a hold the wallet lacks.
	postHoldEntry(t, glPool, pending, gl.HoldPlacedKey(pending), 100, "2010", "2020")
	postHoldEntry(t, glPool, voided, gl.HoldPlacedKey(voided), 40, "2010", "2020")
	postHoldEntry(t, glPool, stranger, gl.HoldPlacedKey(stranger), 7, "2010", "2020")

	// The database mode also compares alice's held amount, the voided hold's release being in
	// flight (100 + 40), with her sub-account of 2020, which holds the stranger's 7 besides.
	for _, tc := range []struct {
		env         map[string]string
		differences string
	}{
		{map[string]string{"GL_DATABASE_URL": glURL, "WALLET_URL": apiURL}, "2 differences"},
		{map[string]string{"GL_DATABASE_URL": glURL, "GL_RECONCILE_WALLET_DATABASE_URL": walletURL}, "3 differences"},
	} {
		env := tc.env
		out, _, err := runGL(t, env, "reconcile")
		require.ErrorContains(t, err, tc.differences, out)
		require.Contains(t, out, "wallet holds      2 (each compared with its placement and release)")
		require.Contains(t, out, "MISSING   hold "+voided+" ("+gl.HoldReleasedKey(voided)+"): voided hold of 0.40 USD on wallet alice has no GL release")
		require.Contains(t, out, "EXTRA     hold "+stranger+" ("+gl.HoldPlacedKey(stranger)+")")

		out, _, err = runGL(t, env, "reconcile", "--json")
		require.Error(t, err)
		var rec struct {
			HoldsCompared bool `json:"holds_compared"`
			WalletHolds   int  `json:"wallet_holds"`
			Differences   []struct {
				Kind       string `json:"kind"`
				TransferID string `json:"transfer_id"`
				HoldID     string `json:"hold_id"`
			} `json:"differences"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rec))
		require.True(t, rec.HoldsCompared)
		require.Equal(t, 2, rec.WalletHolds)
		require.Len(t, rec.Differences, 2)
	}

	// Once the release is posted, only the stranger is left.
	postHoldEntry(t, glPool, voided, gl.HoldReleasedKey(voided), 40, "2020", "2010")
	out, _, err := runGL(t, map[string]string{"GL_DATABASE_URL": glURL, "GL_RECONCILE_WALLET_DATABASE_URL": walletURL}, "reconcile")
	require.ErrorContains(t, err, "2 differences", out)
	require.NotContains(t, out, "MISSING   hold")
	require.Contains(t, out, "BALANCE   wallet alice USD held: held amount 1.00 in the wallet, 1.07 USD in the GL")
}
