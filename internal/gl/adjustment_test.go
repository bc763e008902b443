package gl_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

func adjustmentEntry(amount int64, debit, credit, wallet string) gl.Entry {
	id := uuid.Must(uuid.NewV7())
	e := entry(gl.AdjustmentKey(id), amount, debit, credit)
	e.EventID, e.EventType, e.Kind = e.TransferID, gl.TypeAdjustment, gl.KindAdjustment
	for i := range e.Lines {
		if e.Lines[i].AccountCode != "1010" {
			e.Lines[i].WalletID = wallet
		}
	}
	return e
}

// An adjustment is no movement of the wallet: reconcile reports no extra entry and no hold
// apart for it. The sub-ledger it changes differs from the wallet's figures, and the
// comparison of balances names that wallet.
func TestReconcileLeavesAdjustmentsOutOfTheMovementsButNotOutOfTheBalances(t *testing.T) {
	t.Parallel()
	transfers := []gl.SourceTransfer{{ID: "t-1", Amount: 60, Currency: "USD"}}
	entries := []gl.Entry{
		entry("t-1", 60, "1010", "2010"),
		adjustmentEntry(5, "1010", "2010", "alice"),
		adjustmentEntry(7, "2010", "2020", "alice"),
	}
	r := gl.Reconcile(gl.DefaultRules(), transfers, entries)
	require.True(t, r.Agree(), "%+v", r.Differences)
	require.Equal(t, 1, r.Entries)
	require.Empty(t, r.Holds, "an adjustment on 2020 is no hold")

	wallets := []gl.SourceWallet{{ID: "alice", Currency: "USD", Balance: 60}}
	movements := []gl.SourceMovement{{ID: "t-1", WalletID: "alice", Currency: "USD", BalanceChange: 60}}
	subs := []gl.SubLedger{
		{AccountCode: "2010", WalletID: "alice", Currency: "USD", Balance: gl.SumOf(60 + 5 - 7)},
		{AccountCode: "2020", WalletID: "alice", Currency: "USD", Balance: gl.SumOf(7)},
	}
	cmp := gl.CompareBalances(subs, "2020", gl.WalletSnapshot{Wallets: wallets, Movements: movements}, map[string]bool{"t-1": true})
	require.Len(t, cmp.Differences, 2)
	require.Equal(t, "alice", cmp.Differences[0].WalletID)
	require.Equal(t, gl.FigureBalance, cmp.Differences[0].Figure)
	require.Equal(t, gl.SumOf(65), cmp.Differences[0].GL)
	require.Equal(t, gl.FigureHeld, cmp.Differences[1].Figure)
}

func TestAnAdjustmentRequestIsCheckedAgainstTheChart(t *testing.T) {
	t.Parallel()
	chart := map[string]gl.Account{
		"1010": {Code: "1010", Type: gl.Asset, NormalBalance: gl.Debit},
		"2010": {Code: "2010", Type: gl.Liability, NormalBalance: gl.Credit, WalletControl: true},
	}
	req := gl.AdjustmentRequest{
		IdempotencyKey: "k", Reason: "fee refund", Currency: "USD",
		Lines: []gl.AdjustmentLine{{AccountCode: "1010", Debit: 9}, {AccountCode: "2010", Credit: 9, WalletID: "alice"}},
	}
	id, entryID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e, err := req.Entry(id, entryID, chart, now)
	require.NoError(t, err)
	require.True(t, e.Balanced())
	require.True(t, e.IsAdjustment())
	require.True(t, gl.IsAdjustmentKey(e.TransferID))
	require.Equal(t, now, e.OccurredAt)
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Debit, Amount: 9},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 9, WalletID: "alice"},
	}, e.Lines)

	other := req
	other.Lines = []gl.AdjustmentLine{{AccountCode: "1010", Debit: 9}, {AccountCode: "2010", Credit: 9, WalletID: "bob"}}
	require.NotEqual(t, req.Hash(), other.Hash(), "another wallet is another request")
	_, err = gl.ReplayAdjustment("k", other.Hash(), req.Hash(), gl.Adjustment{ID: id})
	require.ErrorIs(t, err, gl.ErrIdempotencyKeyReused)

	require.False(t, gl.IsAdjustmentKey("adjustment:not-a-uuid"))
	require.False(t, gl.IsAdjustmentKey(uuid.NewString()))
}
