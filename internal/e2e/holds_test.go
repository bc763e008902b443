package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/systemtest"
)

// Holds through the real binaries: a hold placed, one captured in part, one voided and one
// voided by the expiry worker; the wallet's held and available follow, every wallet outbox row
// (the hold events included) comes home acknowledged, the GL posts each hold's placement and
// release with hold_id and the capture's transfer by its rule, account 2020 returns to 0, and
// reconcile, both verify commands and a replay into an empty database agree.
func TestHoldsArePlacedCapturedVoidedExpiredPostedAndReconciled(t *testing.T) {
	t.Parallel()
	s := startSystem(t, "WALLET_HOLD_EXPIRY_INTERVAL=200ms")
	ctx := context.Background()

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bob", "USD", false))
	resp, err := s.walletAPI.Transfer(ctx, "fund-1", systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: 1000, Currency: "USD"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var funding systemtest.Transfer
	require.NoError(t, resp.Decode(&funding))

	type holdJSON struct {
		ID                string `json:"id"`
		WalletID          string `json:"wallet_id"`
		Amount            int64  `json:"amount"`
		Currency          string `json:"currency"`
		Status            string `json:"status"`
		VoidReason        string `json:"void_reason"`
		CapturedAmount    int64  `json:"captured_amount"`
		CaptureTransferID string `json:"capture_transfer_id"`
		ToWalletID        string `json:"to_wallet_id"`
	}
	place := func(key string, amount int64, expiresIn int) holdJSON {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/holds",
			map[string]any{"wallet_id": "alice", "amount": amount, "currency": "USD", "expires_in": expiresIn},
			map[string]string{"Idempotency-Key": key})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var h holdJSON
		require.NoError(t, resp.Decode(&h))
		require.Equal(t, "pending", h.Status)
		require.Equal(t, amount, h.Amount)
		return h
	}
	getHold := func(id string) holdJSON {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/v1/holds/"+id, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var h holdJSON
		require.NoError(t, resp.Decode(&h))
		return h
	}
	type walletJSON struct {
		Balance   int64 `json:"balance"`
		Held      int64 `json:"held"`
		Available int64 `json:"available"`
	}
	wallet := func(id string) walletJSON {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/v1/wallets/"+id, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var w walletJSON
		require.NoError(t, resp.Decode(&w))
		return w
	}
	capture := func(id, key string, body map[string]any) systemtest.Response {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/holds/"+id+"/capture", body, map[string]string{"Idempotency-Key": key})
		require.NoError(t, err)
		return resp
	}
	void := func(id string) systemtest.Response {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/holds/"+id+"/void", nil, nil)
		require.NoError(t, err)
		return resp
	}

	a := place("hold-a", 500, 3600)
	b := place("hold-b", 200, 3600)
	c := place("hold-c", 100, 2) // voided by the expiry worker in about 2 s
	require.Equal(t, walletJSON{Balance: 1000, Held: 800, Available: 200}, wallet("alice"))

	// Money on hold cannot be spent: 300 > available 200.
	resp, err = s.walletAPI.Transfer(ctx, "spend-1", systemtest.TransferRequest{FromWalletID: "alice", ToWalletID: "bob", Amount: 300, Currency: "USD"})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "insufficient-funds")

	// A partial capture releases the whole hold; its replay answers the same.
	resp = capture(a.ID, "capture-a", map[string]any{"to_wallet_id": "bob", "amount": 300})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var captured holdJSON
	require.NoError(t, resp.Decode(&captured))
	require.Equal(t, "captured", captured.Status)
	require.Equal(t, int64(300), captured.CapturedAmount)
	require.Equal(t, "bob", captured.ToWalletID)
	require.NotEmpty(t, captured.CaptureTransferID)
	replay := capture(a.ID, "capture-a", map[string]any{"to_wallet_id": "bob", "amount": 300})
	require.Equal(t, http.StatusCreated, replay.Status, "%s", replay.Body)
	require.Equal(t, "true", replay.Header.Get("Idempotency-Replayed"))
	var replayed holdJSON
	require.NoError(t, replay.Decode(&replayed))
	require.Equal(t, captured.CaptureTransferID, replayed.CaptureTransferID)
	resp = capture(a.ID, "capture-a-again", map[string]any{"to_wallet_id": "bob"})
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "hold-not-pending", "a capture is final")

	resp, err = s.walletAPI.Do(ctx, http.MethodGet, "/v1/transfers/"+captured.CaptureTransferID, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var captureTransfer struct {
		FromWalletID string `json:"from_wallet_id"`
		ToWalletID   string `json:"to_wallet_id"`
		Amount       int64  `json:"amount"`
		HoldID       string `json:"hold_id"`
	}
	require.NoError(t, resp.Decode(&captureTransfer))
	require.Equal(t, "alice", captureTransfer.FromWalletID)
	require.Equal(t, "bob", captureTransfer.ToWalletID)
	require.Equal(t, int64(300), captureTransfer.Amount)
	require.Equal(t, a.ID, captureTransfer.HoldID)

	// A void, and a second one answering 200 unchanged.
	resp = void(b.ID)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var voided holdJSON
	require.NoError(t, resp.Decode(&voided))
	require.Equal(t, "voided", voided.Status)
	require.Equal(t, "requested", voided.VoidReason)
	resp = void(b.ID)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.NoError(t, resp.Decode(&voided))
	require.Equal(t, "voided", voided.Status)
	require.Equal(t, "requested", voided.VoidReason)
	resp = void(a.ID)
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "hold-not-pending", "a captured hold cannot be voided")

	// The expiry worker voids C.
	require.Eventually(t, func() bool {
		h := getHold(c.ID)
		return h.Status == "voided" && h.VoidReason == "expired"
	}, 30*time.Second, 100*time.Millisecond, "hold C is voided by the expiry worker")
	resp = capture(c.ID, "capture-c", map[string]any{"to_wallet_id": "bob"})
	require.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "hold-not-pending", "a voided hold cannot be captured")

	require.Equal(t, walletJSON{Balance: 700, Held: 0, Available: 700}, wallet("alice"))
	require.Equal(t, walletJSON{Balance: 300, Held: 0, Available: 300}, wallet("bob"))

	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 100*time.Millisecond, "every wallet outbox row, the holds' included, is acknowledged")
	counts := map[string]int{}
	rows, err := s.walletDB.Query(ctx, "SELECT event_type, count(*) FROM outbox WHERE status = 'acknowledged' GROUP BY event_type")
	require.NoError(t, err)
	for rows.Next() {
		var typ string
		var n int
		require.NoError(t, rows.Scan(&typ, &n))
		counts[typ] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, counts["HoldPlaced.v1"], "%v", counts)
	require.Equal(t, 1, counts["HoldCaptured.v1"], "%v", counts)
	require.Equal(t, 2, counts["HoldVoided.v1"], "one event per void: the second void of B wrote none; %v", counts)
	require.Equal(t, 2, counts["TransferCompleted.v2"], "the funding and the capture; %v", counts)

	type lineJSON struct {
		AccountCode string `json:"account_code"`
		Direction   string `json:"direction"`
		Amount      int64  `json:"amount"`
	}
	type entryJSON struct {
		ID         string     `json:"id"`
		TransferID string     `json:"transfer_id"`
		HoldID     string     `json:"hold_id"`
		EventType  string     `json:"event_type"`
		Kind       string     `json:"kind"`
		Lines      []lineJSON `json:"lines"`
	}
	// GET /v1/entries?transfer_id= refuses a hold's movement key (not a UUID), so the hold
	// entries are read from the listing of every entry.
	resp, err = s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?limit=100", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var listing struct {
		Entries    []entryJSON `json:"entries"`
		NextCursor *string     `json:"next_cursor"`
	}
	require.NoError(t, resp.Decode(&listing))
	require.Nil(t, listing.NextCursor)
	require.Len(t, listing.Entries, 8, "2 transfers, 3 placements, 3 releases")
	byTransferID := map[string]entryJSON{}
	for _, e := range listing.Entries {
		byTransferID[e.TransferID] = e
	}
	entryOf := func(transferID string) entryJSON {
		t.Helper()
		e, ok := byTransferID[transferID]
		require.True(t, ok, "an entry of %s", transferID)
		if len(transferID) == 36 { // a transfer's own id: also found by the lookup
			resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+transferID, nil, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			var out struct {
				Entries []entryJSON `json:"entries"`
			}
			require.NoError(t, resp.Decode(&out))
			require.Len(t, out.Entries, 1, "transfer %s", transferID)
			require.Equal(t, e.ID, out.Entries[0].ID)
		}
		return e
	}
	requireLines := func(e entryJSON, amount int64, debit, credit string) {
		t.Helper()
		require.ElementsMatch(t, []lineJSON{
			{AccountCode: debit, Direction: "debit", Amount: amount},
			{AccountCode: credit, Direction: "credit", Amount: amount},
		}, e.Lines, "entry %s", e.TransferID)
	}
	for _, h := range []holdJSON{a, b, c} {
		placed := entryOf("hold:" + h.ID + ":placed")
		require.Equal(t, h.ID, placed.HoldID)
		require.Equal(t, [2]string{"HoldPlaced.v1", "hold"}, [2]string{placed.EventType, placed.Kind})
		requireLines(placed, h.Amount, "2010", "2020")
		released := entryOf("hold:" + h.ID + ":released")
		require.Equal(t, h.ID, released.HoldID)
		require.Equal(t, "hold", released.Kind)
		requireLines(released, h.Amount, "2020", "2010") // the whole held amount, also for A's partial capture
	}
	captureEntry := entryOf(captured.CaptureTransferID)
	require.Empty(t, captureEntry.HoldID, "the capture's transfer is an ordinary transfer in the GL")
	require.Equal(t, [2]string{"TransferCompleted.v2", "transfer"}, [2]string{captureEntry.EventType, captureEntry.Kind})
	requireLines(captureEntry, 300, "2010", "2010")
	fundingEntry := entryOf(funding.ID)
	require.Equal(t, [2]string{"TransferCompleted.v2", "deposit"}, [2]string{fundingEntry.EventType, fundingEntry.Kind})
	requireLines(fundingEntry, 1000, "1010", "2010")
	require.Equal(t, "HoldCaptured.v1", byTransferID["hold:"+a.ID+":released"].EventType)
	require.Equal(t, "HoldVoided.v1", byTransferID["hold:"+b.ID+":released"].EventType)
	require.Equal(t, "HoldVoided.v1", byTransferID["hold:"+c.ID+":released"].EventType)

	// Every hold finished: funds on hold are 0.
	resp, err = s.glAPI.Do(ctx, http.MethodGet, "/v1/accounts/2020/balance?currency=USD", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var balance struct {
		Debits  json.Number `json:"debits"`
		Credits json.Number `json:"credits"`
		Balance json.Number `json:"balance"`
	}
	require.NoError(t, resp.Decode(&balance))
	require.Equal(t, "800", balance.Debits.String())
	require.Equal(t, "800", balance.Credits.String())
	require.Equal(t, "0", balance.Balance.String())

	// The GL counts what it posted by the event's own type.
	resp, err = s.glAPI.Do(ctx, http.MethodGet, "/metrics", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	for _, want := range []string{
		`walletgl_consumer_processed_total{event_type="HoldPlaced.v1",service="gl"} 3`,
		`walletgl_consumer_processed_total{event_type="HoldCaptured.v1",service="gl"} 1`,
		`walletgl_consumer_processed_total{event_type="HoldVoided.v1",service="gl"} 2`,
		`walletgl_consumer_processed_total{event_type="TransferCompleted.v2",service="gl"} 2`,
	} {
		require.Contains(t, string(resp.Body), want+"\n")
	}

	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL, "WALLET_URL=http://" + s.walletAddr}
	const reconciled = "verdict: RECONCILED — 2 transfers, 2 entries"
	const holds = "holds USD  3 placed, 0 open totalling 0.00; account 2020 0.00 (equal)"
	out, err := s.command(t, s.bins.GL, glEnv, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet's API; hold entries are no unmatched transfers")
	require.Contains(t, out, holds)
	out, err = s.command(t, s.bins.GL, []string{"GL_DATABASE_URL=" + s.glDBURL, "GL_RECONCILE_WALLET_DATABASE_URL=" + s.walletDBURL}, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet database's view")
	require.Contains(t, out, holds)
	out, err = s.command(t, s.bins.GL, glEnv, "verify")
	require.NoError(t, err, out)
	out, err = s.command(t, s.bins.Wallet, []string{"WALLET_DATABASE_URL=" + s.walletDBURL}, "verify")
	require.NoError(t, err, out)

	// The stream replayed into an empty database rebuilds the same ledger, holds included.
	into := envtest.DatabaseURL(t)
	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", into)
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       8\n")
	require.Contains(t, out, reconciled)
	rebuilt := openPool(t, into)
	const holdQuery = `SELECT e.transfer_id, e.hold_id::text, l.account_code, l.direction, l.amount
		FROM journal_entries e JOIN journal_lines l ON l.entry_id = e.id
		WHERE e.hold_id IS NOT NULL ORDER BY e.transfer_id, l.direction`
	read := func(rows pgx.Rows, err error) []string {
		t.Helper()
		require.NoError(t, err)
		defer rows.Close()
		var got []string
		for rows.Next() {
			var tid, hid, acct, dir string
			var amount int64
			require.NoError(t, rows.Scan(&tid, &hid, &acct, &dir, &amount))
			got = append(got, fmt.Sprintf("%s %s %s %s %d", tid, hid, acct, dir, amount))
		}
		require.NoError(t, rows.Err())
		return got
	}
	live := read(s.glDB.Query(ctx, holdQuery))
	require.Len(t, live, 12, "3 holds × placement and release × 2 lines")
	require.Equal(t, live, read(rebuilt.Query(ctx, holdQuery)))
}
