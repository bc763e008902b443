package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
)

// walletAPI stands in for the wallet's HTTP API as it documents GET /v1/transfers (pages oldest
// first, an opaque next_cursor) and GET /v1/transfers/{id} (404 when unknown). The GL's tests
// import nothing of the wallet; the real API is read through the binaries in internal/e2e.
type walletAPI struct {
	mu        sync.Mutex
	transfers []gl.SourceTransfer
	late      []gl.SourceTransfer // made right after the next listing is answered
}

func startWalletAPI(t *testing.T, transfers ...gl.SourceTransfer) (*walletAPI, string) {
	t.Helper()
	w := &walletAPI{transfers: transfers}
	type transferJSON struct {
		ID           string `json:"id"`
		Amount       int64  `json:"amount"`
		Currency     string `json:"currency"`
		Status       string `json:"status"`
		OutboxStatus string `json:"outbox_status"`
	}
	encode := func(rw http.ResponseWriter, v any) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/transfers", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		start, _ := strconv.Atoi(r.URL.Query().Get("after"))
		limit = min(max(limit, 1), 1000)
		end := min(start+limit, len(w.transfers))
		page := struct {
			Transfers  []transferJSON `json:"transfers"`
			NextCursor *string        `json:"next_cursor"` // null on the last page, as the wallet answers
		}{Transfers: []transferJSON{}}
		for _, tr := range w.transfers[start:end] {
			page.Transfers = append(page.Transfers, transferJSON{tr.ID, tr.Amount, tr.Currency, "completed", "acknowledged"})
		}
		if end < len(w.transfers) {
			next := strconv.Itoa(end)
			page.NextCursor = &next
		}
		encode(rw, page)
		w.transfers, w.late = append(w.transfers, w.late...), nil
	})
	mux.HandleFunc("GET /v1/transfers/{id}", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, tr := range w.transfers {
			if tr.ID == r.PathValue("id") {
				encode(rw, transferJSON{tr.ID, tr.Amount, tr.Currency, "completed", "acknowledged"})
				return
			}
		}
		http.Error(rw, `{"type":"transfer-not-found"}`, http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return w, srv.URL
}

// addAfterNextListing makes transfers right after the wallet answers its next listing request.
func (w *walletAPI) addAfterNextListing(trs ...gl.SourceTransfer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.late = append(w.late, trs...)
}

// walletDatabase is a wallet database made by the wallet's migrations, holding transfers
// from bank to alice written with plain SQL (the GL's tests import nothing of the wallet), and
// the balances they leave.
func walletDatabase(t *testing.T, transfers []gl.SourceTransfer) string {
	t.Helper()
	pool, dbURL := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO wallets (id, currency, allow_negative) VALUES ('bank', 'USD', true), ('alice', 'USD', false)`)
	require.NoError(t, err)
	for i, tr := range transfers {
		_, err := pool.Exec(ctx, `INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
			VALUES ($1, $2, '\x00', 'bank', 'alice', $3, $4, gen_random_uuid())`, tr.ID, fmt.Sprintf("k%d", i), tr.Amount, tr.Currency)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE wallets w SET balance = CASE WHEN w.id = 'alice' THEN t.total ELSE -t.total END
		FROM (SELECT coalesce(sum(amount), 0) AS total FROM transfers) t`)
	require.NoError(t, err)
	return dbURL
}

func TestReconcileReportsEachDifferenceFromTheAPIAndTheDatabase(t *testing.T) {
	t.Parallel()
	glPool, glURL := envtest.MigratedPool(t, "gl")
	var transfers []gl.SourceTransfer
	for i := range 5 {
		transfers = append(transfers, gl.SourceTransfer{ID: uuid.NewString(), Amount: int64(100 + i), Currency: "USD"})
	}
	_, apiURL := startWalletAPI(t, transfers...)
	walletURL := walletDatabase(t, transfers)

	// The GL holds transfers 0..2 correctly, 3 with a wrong amount, nothing for 4, and an entry
	// for a transfer the wallet never made.
	for i, tr := range transfers[:4] {
		amount := tr.Amount
		if i == 3 {
			amount++
		}
		postConsistently(t, glPool, uuid.NewString(), tr.ID, amount)
	}
	stranger := uuid.NewString()
	postConsistently(t, glPool, uuid.NewString(), stranger, 42)

	// The database mode also compares alice's balance (transfers 0..3, 4 being in flight) with
	// her sub-ledger, which holds the wrong amount and the stranger's 42 besides.
	sources := []struct {
		name        string
		env         map[string]string
		header      string
		differences int
	}{
		{"api", map[string]string{"GL_DATABASE_URL": glURL, "WALLET_URL": apiURL}, "wallet API " + apiURL, 3},
		{"database", map[string]string{"GL_DATABASE_URL": glURL, "GL_RECONCILE_WALLET_DATABASE_URL": walletURL},
			"wallet database " + dbName(t, walletURL) + " (view reconcile_transfers_v4)", 4},
	}
	for _, src := range sources {
		t.Run("reading the wallet's "+src.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := runGL(t, src.env, "reconcile")
			require.ErrorContains(t, err, fmt.Sprintf("%d differences", src.differences))
			require.Contains(t, out, "gl reconcile: "+src.header+" against GL database")
			require.Contains(t, out, "MISSING   transfer "+transfers[4].ID)
			require.Contains(t, out, "MISMATCH  transfer "+transfers[3].ID)
			require.Contains(t, out, "amount 103 in the wallet, debit line of 104 in the GL")
			require.Contains(t, out, "EXTRA     transfer "+stranger)
			require.Contains(t, out, fmt.Sprintf("verdict: NOT RECONCILED — %d differences", src.differences))

			out, _, err = runGL(t, src.env, "reconcile", "--json")
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

	t.Run("a GL that holds exactly the wallet's postings agrees with it", func(t *testing.T) {
		t.Parallel()
		goodPool, goodURL := envtest.MigratedPool(t, "gl")
		for _, tr := range transfers {
			postConsistently(t, goodPool, uuid.NewString(), tr.ID, tr.Amount)
		}
		for _, env := range []map[string]string{
			{"GL_DATABASE_URL": goodURL, "WALLET_URL": apiURL},
			{"GL_DATABASE_URL": goodURL, "GL_RECONCILE_WALLET_DATABASE_URL": walletURL},
		} {
			out, _, err := runGL(t, env, "reconcile")
			require.NoError(t, err)
			require.Contains(t, out, "verdict: RECONCILED — 5 transfers, 5 entries")
		}
	})

	t.Run("WALLET_DATABASE_URL is the wallet's setting: gl says so and reads the API", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := runGL(t, map[string]string{"GL_DATABASE_URL": glURL, "WALLET_URL": apiURL, "WALLET_DATABASE_URL": walletURL}, "reconcile")
		require.ErrorContains(t, err, "3 differences")
		require.Contains(t, out, "gl reconcile: wallet API "+apiURL)
		require.Contains(t, errOut, "WALLET_DATABASE_URL is the wallet's own setting and gl does not read it")
	})
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	return cfg.ConnConfig.Database
}
