package walletapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
	"walletgl/internal/gl/walletapi"
)

// fakeWallet answers GET /v1/transfers and GET /v1/transfers/{id} as the wallet's API documents
// them (the real API is exercised through the binaries in internal/e2e): pages oldest first,
// limit capped at 1000, next_cursor opaque and equal to the request's cursor on an empty page,
// 404 problem+json for an unknown transfer. It counts the list requests.
type fakeWallet struct {
	transfers []gl.SourceTransfer
	lists     int
}

func (f *fakeWallet) handler() http.Handler {
	type transferJSON struct {
		ID             string `json:"id"`
		IdempotencyKey string `json:"idempotency_key"`
		Amount         int64  `json:"amount"`
		Currency       string `json:"currency"`
		Status         string `json:"status"`
		OutboxStatus   string `json:"outbox_status"`
		// As the wallet answers them: left out unless set.
		ReversesTransferID string `json:"reverses_transfer_id,omitempty"`
		BatchID            string `json:"batch_id,omitempty"`
		BatchReversalID    string `json:"batch_reversal_id,omitempty"`
	}
	toJSON := func(t gl.SourceTransfer) transferJSON {
		out := transferJSON{ID: t.ID, IdempotencyKey: "k-" + t.ID, Amount: t.Amount, Currency: t.Currency, Status: "completed",
			OutboxStatus: "acknowledged", ReversesTransferID: t.ReversesTransferID}
		switch {
		case t.EntryKey == "":
		case t.ReversesTransferID != "":
			out.BatchReversalID = t.EntryKey
		default:
			out.BatchID = t.EntryKey
		}
		return out
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/transfers", func(w http.ResponseWriter, r *http.Request) {
		f.lists++
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil || limit < 1 {
			http.Error(w, "bad limit", http.StatusBadRequest)
			return
		}
		limit = min(limit, 1000)
		after := r.URL.Query().Get("after")
		start := 0
		if after != "" {
			n, err := strconv.Atoi(after[len("c"):])
			if err != nil {
				http.Error(w, "bad cursor", http.StatusBadRequest)
				return
			}
			start = n
		}
		end := min(start+limit, len(f.transfers))
		out := struct {
			Transfers  []transferJSON `json:"transfers"`
			NextCursor *string        `json:"next_cursor"` // null on the last page, as the wallet answers
		}{Transfers: []transferJSON{}}
		for _, t := range f.transfers[start:end] {
			out.Transfers = append(out.Transfers, toJSON(t))
		}
		if end < len(f.transfers) {
			next := fmt.Sprintf("c%d", end)
			out.NextCursor = &next
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /v1/transfers/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, t := range f.transfers {
			if t.ID == r.PathValue("id") {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(toJSON(t))
				return
			}
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"type":"transfer-not-found","status":404}`))
	})
	return mux
}

func transfers(n int) []gl.SourceTransfer {
	out := make([]gl.SourceTransfer, n)
	for i := range out {
		out[i] = gl.SourceTransfer{ID: fmt.Sprintf("tr-%02d", i), Amount: int64(100 + i), Currency: "USD"}
	}
	return out
}

func TestTransfersReadsEveryPage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		transfers int
		requests  int
	}{
		{"a last page shorter than asked ends the listing", 5, 3},
		{"a listing that fills its last page ends there (next_cursor null)", 4, 2},
		{"an empty wallet is one request", 0, 1},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeWallet{transfers: transfers(tt.transfers)}
			srv := httptest.NewServer(f.handler())
			t.Cleanup(srv.Close)
			c := walletapi.New(srv.URL + "/")
			c.PageSize = 2
			got, err := c.Transfers(context.Background())
			require.NoError(t, err)
			if tt.transfers == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, f.transfers, got)
			}
			require.Equal(t, tt.requests, f.lists)
		})
	}
}

func TestTransferLooksOneUp(t *testing.T) {
	t.Parallel()
	f := &fakeWallet{transfers: transfers(3)}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	c := walletapi.New(srv.URL)

	got, found, err := c.Transfer(context.Background(), "tr-01")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, gl.SourceTransfer{ID: "tr-01", Amount: 101, Currency: "USD"}, got)

	_, found, err = c.Transfer(context.Background(), "no such/transfer")
	require.NoError(t, err, "a 404 is an answer: the wallet has no such transfer")
	require.False(t, found)
}

// A batch's leg is posted under its batch's id, a leg's reversal by a batch reversal under the
// batch reversal's: the client reads both from batch_id and batch_reversal_id, as the database
// view reconcile_transfers_v4 tells them (entry_key).
func TestTransfersCarryTheKeyOfTheEntryThatPostsThem(t *testing.T) {
	t.Parallel()
	batch, batchReversal := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	f := &fakeWallet{transfers: []gl.SourceTransfer{
		{ID: "plain", Amount: 5, Currency: "USD"},
		{ID: "leg-0", Amount: 6, Currency: "USD", EntryKey: batch},
		{ID: "leg-1", Amount: 7, Currency: "EUR", EntryKey: batch},
		{ID: "leg-1-back", Amount: 7, Currency: "EUR", ReversesTransferID: "leg-1", EntryKey: batchReversal},
		{ID: "plain-back", Amount: 5, Currency: "USD", ReversesTransferID: "plain"},
	}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	c := walletapi.New(srv.URL)
	got, err := c.Transfers(context.Background())
	require.NoError(t, err)
	require.Equal(t, f.transfers, got)
	for _, want := range f.transfers {
		one, found, err := c.Transfer(context.Background(), want.ID)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want, one)
	}
	require.Equal(t, batch, got[1].Key())
	require.True(t, got[3].InBatch())
	require.False(t, got[4].InBatch(), "a reversal outside a batch is posted under its own id")
}

func TestAnythingButTheWalletsAnswerIsAnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"a server error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "database down", http.StatusServiceUnavailable)
		}, "503 Service Unavailable: database down"},
		{"a listing that is not there (not the wallet's API)", http.NotFound, "404 Not Found (is WALLET_URL the wallet's API?)"},
		{"a body that is not JSON", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html>"))
		}, "decode GET /v1/transfers"},
		{"a transfer without an id", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"transfers":[{"amount":5,"currency":"USD"}],"next_cursor":"x"}`))
		}, "without an id"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			_, err := walletapi.New(srv.URL).Transfers(context.Background())
			require.ErrorContains(t, err, tt.want)
		})
	}

	_, err := walletapi.New("http://127.0.0.1:1").Transfers(context.Background())
	require.ErrorContains(t, err, "ask the wallet")
}

func TestClientPagesHoldsAndSaysWhenTheWalletHasNone(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/holds" && r.URL.Query().Get("after") == "":
			_, _ = w.Write([]byte(`{"holds":[{"id":"h1","wallet_id":"alice","amount":5,"currency":"USD","status":"pending","expires_at":"2026-01-01T00:00:00Z"}],"next_cursor":"c1"}`))
		case r.URL.Path == "/v1/holds" && r.URL.Query().Get("after") == "c1":
			_, _ = w.Write([]byte(`{"holds":[{"id":"h2","wallet_id":"bob","amount":7,"currency":"EUR","status":"voided"}],"next_cursor":null}`))
		case r.URL.Path == "/v1/holds/h2":
			_, _ = w.Write([]byte(`{"id":"h2","wallet_id":"bob","amount":7,"currency":"EUR","status":"voided"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c := walletapi.New(srv.URL)
	holds, err := c.Holds(context.Background())
	require.NoError(t, err)
	require.Equal(t, []gl.SourceHold{
		{ID: "h1", WalletID: "alice", Amount: 5, Currency: "USD", Status: gl.HoldPending},
		{ID: "h2", WalletID: "bob", Amount: 7, Currency: "EUR", Status: gl.HoldVoided},
	}, holds)
	h, found, err := c.Hold(context.Background(), "h2")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, holds[1], h)
	_, found, err = c.Hold(context.Background(), "nope")
	require.NoError(t, err)
	require.False(t, found)

	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed) // a wallet whose /v1/holds is POST only
	}))
	t.Cleanup(old.Close)
	_, err = walletapi.New(old.URL).Holds(context.Background())
	require.ErrorIs(t, err, gl.ErrNoHolds)
}
