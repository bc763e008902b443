package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// batchLineJSON and batchEntryJSON are the parts of the GL's entry a batch's checks read.
type batchLineJSON struct {
	AccountCode string `json:"account_code"`
	Direction   string `json:"direction"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	TransferID  string `json:"transfer_id"`
}

type batchEntryJSON struct {
	ID              string            `json:"id"`
	TransferID      string            `json:"transfer_id"`
	Currency        string            `json:"currency"`
	EventType       string            `json:"event_type"`
	Kind            string            `json:"kind"`
	ReversesEntryID string            `json:"reverses_entry_id"`
	Metadata        map[string]string `json:"metadata"`
	Lines           []batchLineJSON   `json:"lines"`
}

type batchLegJSON struct {
	ID                 string `json:"id"`
	FromWalletID       string `json:"from_wallet_id"`
	ToWalletID         string `json:"to_wallet_id"`
	Amount             int64  `json:"amount"`
	Currency           string `json:"currency"`
	OutboxStatus       string `json:"outbox_status"`
	BatchID            string `json:"batch_id"`
	BatchReversalID    string `json:"batch_reversal_id"`
	ReversesTransferID string `json:"reverses_transfer_id"`
}

// An atomic batch through the real binaries, end to end: three legs in two currencies post as
// ONE entry balanced per currency with each leg's two lines, and the batch's one outbox row
// comes home acknowledged; a batch whose third leg is refused answers 422 naming it and writes
// nothing in either database; a batch reversal of one leg posts one entry reversing exactly that
// leg's lines; gl reconcile (the wallet's API and its database's views), gl verify and wallet
// verify agree; gl replay rebuilds the same postings; and the metadata filter finds the legs in
// the wallet and the batch's entry in the GL.
func TestABatchIsPostedAsOneEntryRefusedWhollyReversedByLegAndReconciled(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()

	for _, w := range []struct {
		id, currency string
		external     bool
	}{{"bank-usd", "USD", true}, {"bank-eur", "EUR", true}, {"alice-usd", "USD", false}, {"bob-usd", "USD", false},
		{"alice-eur", "EUR", false}, {"bob-eur", "EUR", false}} {
		require.NoError(t, s.walletAPI.CreateWallet(ctx, w.id, w.currency, w.external))
	}
	transfer := func(key, from, to string, amount int64, currency string) {
		t.Helper()
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfers",
			map[string]any{"from_wallet_id": from, "to_wallet_id": to, "amount": amount, "currency": currency},
			map[string]string{"Idempotency-Key": key})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	transfer("fund-usd", "bank-usd", "alice-usd", 1000, "USD")
	transfer("fund-eur", "bank-eur", "alice-eur", 500, "EUR")
	waitAcknowledged := func(msg string) {
		t.Helper()
		require.Eventually(t, func() bool {
			var open int
			require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
			return open == 0
		}, 60*time.Second, 100*time.Millisecond, msg)
	}
	leg := func(from, to string, amount int64, currency string) map[string]any {
		return map[string]any{"from_wallet_id": from, "to_wallet_id": to, "amount": amount, "currency": currency}
	}

	// (a) Three legs, two currencies: one entry, one acknowledged outbox row.
	resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfer-batches", map[string]any{
		"transfers": []any{leg("alice-usd", "bob-usd", 300, "USD"), leg("alice-eur", "bob-eur", 200, "EUR"), leg("bank-usd", "bob-usd", 50, "USD")},
		"metadata":  map[string]string{"order_id": "batch-1"},
	}, map[string]string{"Idempotency-Key": "batch-1"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var batch struct {
		ID        string         `json:"id"`
		Transfers []batchLegJSON `json:"transfers"`
	}
	require.NoError(t, resp.Decode(&batch))
	require.Len(t, batch.Transfers, 3)
	waitAcknowledged("the batch is posted and its one outbox row acknowledged")
	var batchRows int
	require.NoError(t, s.walletDB.QueryRow(ctx, `SELECT count(*) FROM outbox
		WHERE event_type = 'TransferBatchCompleted.v1' AND status = 'acknowledged'`).Scan(&batchRows))
	require.Equal(t, 1, batchRows, "ONE event for the batch, acknowledged")
	for _, l := range batch.Transfers {
		var got batchLegJSON
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/v1/transfers/"+l.ID, nil, nil)
		require.NoError(t, err)
		require.NoError(t, resp.Decode(&got))
		require.Equal(t, "acknowledged", got.OutboxStatus, "a leg's outbox status is its batch's")
		require.Equal(t, batch.ID, got.BatchID)
	}

	entryOf := func(key string) batchEntryJSON {
		t.Helper()
		resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+url.QueryEscape(key), nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Entries []batchEntryJSON `json:"entries"`
		}
		require.NoError(t, resp.Decode(&out))
		require.Len(t, out.Entries, 1, "one entry for %s", key)
		return out.Entries[0]
	}
	entry := entryOf(batch.ID)
	require.Equal(t, batch.ID, entry.TransferID)
	require.Equal(t, "TransferBatchCompleted.v1", entry.EventType)
	require.Equal(t, "XXX", entry.Currency, "legs in two currencies")
	require.Equal(t, map[string]string{"order_id": "batch-1"}, entry.Metadata)
	require.Len(t, entry.Lines, 6, "each leg's two lines")
	require.Equal(t, entry.ID, entryOf(batch.Transfers[1].ID).ID, "a leg's id finds its batch's entry")
	balance := map[string]int64{}
	for _, l := range entry.Lines {
		if l.Direction == "debit" {
			balance[l.Currency] += l.Amount
		} else {
			balance[l.Currency] -= l.Amount
		}
	}
	require.Equal(t, map[string]int64{"USD": 0, "EUR": 0}, balance, "the entry balances in each currency")
	for _, l := range batch.Transfers {
		lines := linesOf(entry, l.ID)
		require.Len(t, lines, 2, "leg %s", l.ID)
		require.ElementsMatch(t, []string{"debit", "credit"}, []string{lines[0].Direction, lines[1].Direction})
		for _, line := range lines {
			require.Equal(t, l.Amount, line.Amount)
			require.Equal(t, l.Currency, line.Currency)
		}
	}
	var glEntries int
	require.NoError(t, s.glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&glEntries))
	require.Equal(t, 3, glEntries, "two transfers and ONE batch")

	// (b) The third leg is refused: 422 naming leg 2, and nothing written in either database.
	before := counts(t, s.walletDB, s.glDB)
	balances := func() map[string]int64 {
		t.Helper()
		rows, err := s.walletDB.Query(ctx, "SELECT id, balance FROM wallets")
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var id string
			var b int64
			require.NoError(t, rows.Scan(&id, &b))
			out[id] = b
		}
		require.NoError(t, rows.Err())
		return out
	}
	balancesBefore := balances()
	resp, err = s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfer-batches", map[string]any{
		"transfers": []any{leg("alice-usd", "bob-usd", 100, "USD"), leg("alice-eur", "bob-eur", 100, "EUR"), leg("alice-usd", "bob-usd", 100000, "USD")},
		"metadata":  map[string]string{"order_id": "batch-2"},
	}, map[string]string{"Idempotency-Key": "batch-2"})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	var refusal struct {
		Type string `json:"type"`
		Leg  *int   `json:"leg"`
	}
	require.NoError(t, resp.Decode(&refusal))
	require.Contains(t, refusal.Type, "insufficient-funds")
	require.NotNil(t, refusal.Leg, "%s", resp.Body)
	require.Equal(t, 2, *refusal.Leg)
	// A marker transfer on other wallets, once posted and acknowledged, shows the pipeline
	// quiet: whatever the refused batch had sent would have been read before it.
	transfer("marker", "bank-eur", "alice-eur", 1, "EUR")
	waitAcknowledged("the marker is posted and acknowledged")
	want := before
	for table, n := range map[string]int{"wallet transfers": 1, "wallet outbox": 1, "wallet inbox": 1,
		"gl journal_entries": 1, "gl journal_lines": 2, "gl inbox": 1, "gl outbox": 1} {
		want[table] += n
	}
	require.Equal(t, want, counts(t, s.walletDB, s.glDB), "the refused batch wrote nothing anywhere; the marker its one transfer")
	balancesAfter := balances()
	balancesBefore["bank-eur"]--
	balancesBefore["alice-eur"]++
	require.Equal(t, balancesBefore, balancesAfter, "no balance moved but the marker's")

	// (c) A batch reversal of the EUR leg: one entry reversing exactly that leg's lines.
	reversedLeg := batch.Transfers[1]
	resp, err = s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfer-batches/"+batch.ID+"/reversals",
		map[string]any{"transfers": []string{reversedLeg.ID}}, map[string]string{"Idempotency-Key": "undo-eur"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var reversal struct {
		ID        string         `json:"id"`
		Reversals []batchLegJSON `json:"reversals"`
	}
	require.NoError(t, resp.Decode(&reversal))
	require.Len(t, reversal.Reversals, 1)
	legReversal := reversal.Reversals[0]
	require.Equal(t, reversedLeg.ID, legReversal.ReversesTransferID)
	require.Equal(t, reversal.ID, legReversal.BatchReversalID)
	waitAcknowledged("the batch reversal is posted and acknowledged")
	reversalEntry := entryOf(reversal.ID)
	require.Equal(t, "TransferBatchReversed.v1", reversalEntry.EventType)
	require.Equal(t, entry.ID, reversalEntry.ReversesEntryID)
	require.Len(t, reversalEntry.Lines, 2, "the one leg's lines, no other")
	swapped := map[string]string{"debit": "credit", "credit": "debit"}
	var wantLines []batchLineJSON
	for _, l := range linesOf(entry, reversedLeg.ID) {
		wantLines = append(wantLines, batchLineJSON{AccountCode: l.AccountCode, Direction: swapped[l.Direction],
			Amount: l.Amount, Currency: l.Currency, TransferID: legReversal.ID})
	}
	require.ElementsMatch(t, wantLines, reversalEntry.Lines)
	var named int
	require.NoError(t, s.glDB.QueryRow(ctx, `SELECT count(*) FROM journal_lines r JOIN journal_lines o ON o.id = r.reverses_line_id
		WHERE r.entry_id = $1 AND o.entry_id = $2 AND o.transfer_id = $3 AND r.transfer_id = $4`,
		reversalEntry.ID, entry.ID, reversedLeg.ID, legReversal.ID).Scan(&named))
	require.Equal(t, 2, named, "each reversing line names the leg's line it reverses")

	// (d) Reconcile through the wallet's API and its database's views; both verify commands.
	// Transfers: 2 fundings, 3 legs, the marker, the leg's reversal; entries: 2, the batch, the
	// marker, the batch reversal.
	reconciled := "verdict: RECONCILED — 7 transfers, 5 entries"
	glEnv := []string{"GL_DATABASE_URL=" + s.glDBURL, "WALLET_URL=http://" + s.walletAddr}
	out, err := s.command(t, s.bins.GL, glEnv, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet's API")
	out, err = s.command(t, s.bins.GL, []string{"GL_DATABASE_URL=" + s.glDBURL, "GL_RECONCILE_WALLET_DATABASE_URL=" + s.walletDBURL}, "reconcile")
	require.NoError(t, err, out)
	require.Contains(t, out, reconciled, "read through the wallet database's views")
	require.Contains(t, out, "balance and held amount against its sub-ledger", "the balances compared too")
	out, err = s.command(t, s.bins.GL, glEnv, "verify")
	require.NoError(t, err, out)
	require.Contains(t, out, "verdict: PASS")
	out, err = s.command(t, s.bins.Wallet, []string{"WALLET_DATABASE_URL=" + s.walletDBURL}, "verify")
	require.NoError(t, err, out)
	require.Contains(t, out, "verdict: PASS")

	// (e) The stream replayed into an empty database rebuilds the same postings.
	replayURL := envtest.DatabaseURL(t)
	out, err = s.command(t, s.bins.GL, glEnv, "replay", "--from-start", "--into", replayURL)
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       5\n")
	require.Contains(t, out, reconciled)
	require.Equal(t, postings(t, s.glDB), postings(t, openPool(t, replayURL)), "the rebuild's postings are the live GL's")

	// (f) The batch's metadata finds its legs in the wallet and its one entry in the GL.
	filter := url.Values{"metadata[order_id]": {"batch-1"}}.Encode()
	resp, err = s.walletAPI.Do(ctx, http.MethodGet, "/v1/transfers?"+filter, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var listed struct {
		Transfers []batchLegJSON `json:"transfers"`
	}
	require.NoError(t, resp.Decode(&listed))
	var legIDs, listedIDs []string
	for _, l := range batch.Transfers {
		legIDs = append(legIDs, l.ID)
	}
	for _, l := range listed.Transfers {
		listedIDs = append(listedIDs, l.ID)
	}
	require.ElementsMatch(t, legIDs, listedIDs, "the wallet lists the batch's legs")
	resp, err = s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?"+filter, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var found struct {
		Entries []batchEntryJSON `json:"entries"`
	}
	require.NoError(t, resp.Decode(&found))
	require.Len(t, found.Entries, 1, "%s", resp.Body)
	require.Equal(t, entry.ID, found.Entries[0].ID, "the GL lists the batch's one entry")
}

// linesOf is the lines of e tagged with leg.
func linesOf(e batchEntryJSON, leg string) []batchLineJSON {
	var out []batchLineJSON
	for _, l := range e.Lines {
		if l.TransferID == leg {
			out = append(out, l)
		}
	}
	return out
}

// counts is how many rows each table a movement writes holds, in both databases.
func counts(t *testing.T, walletDB, glDB *pgxpool.Pool) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, db := range []struct {
		name   string
		pool   *pgxpool.Pool
		tables []string
	}{
		{"wallet", walletDB, []string{"transfers", "transfer_batches", "batch_reversals", "holds", "refusals", "outbox", "inbox"}},
		{"gl", glDB, []string{"journal_entries", "journal_lines", "adjustments", "inbox", "outbox"}},
	} {
		for _, table := range db.tables {
			var n int
			require.NoError(t, db.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n), table)
			out[db.name+" "+table] = n
		}
	}
	return out
}

// postings is every line of a GL as (event, entry key, account, direction, amount, currency,
// leg tag, the entry key and leg of the line it reverses), sorted: what a rebuild must
// reproduce, whatever ids and times its rows get.
func postings(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT e.event_id::text, e.transfer_id, l.account_code, l.direction, l.amount, l.currency,
		       coalesce(l.transfer_id, ''), coalesce(oe.transfer_id || '/' || o.transfer_id, '')
		FROM journal_lines l
		JOIN journal_entries e ON e.id = l.entry_id
		LEFT JOIN journal_lines o ON o.id = l.reverses_line_id
		LEFT JOIN journal_entries oe ON oe.id = o.entry_id
		ORDER BY 1, 2, 3, 4, 5, 6, 7, 8`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var event, key, account, direction, currency, leg, reverses string
		var amount int64
		require.NoError(t, rows.Scan(&event, &key, &account, &direction, &amount, &currency, &leg, &reverses))
		out = append(out, fmt.Sprintf("%s %s %s %s %d %s %s %s", event, key, account, direction, amount, currency, leg, reverses))
	}
	require.NoError(t, rows.Err())
	return out
}
