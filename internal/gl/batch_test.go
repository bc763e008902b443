package gl_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

func batchEnvelope(t *testing.T, typ string, data any) contract.Envelope {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	return contract.Envelope{SpecVersion: "1.0", ID: uuid.NewString(), Source: contract.SourceWallet, Type: typ, Time: time.Now(), DataContentType: "application/json", Data: raw}
}

// postedBatch is a batch of a USD deposit, a USD transfer and an EUR withdrawal, as the ledger
// reads it back (line ids set), and its reversal of the first and last legs.
func postedBatch(t *testing.T) (legs []contract.BatchLeg, batch gl.Entry, rev contract.TransferBatchReversed, reversal gl.Entry) {
	t.Helper()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	legs = []contract.BatchLeg{
		{TransferID: uuid.NewString(), FromWalletID: "ext", ToWalletID: "a", Amount: 1000, Currency: "USD", Kind: contract.KindDeposit},
		{TransferID: uuid.NewString(), FromWalletID: "a", ToWalletID: "b", Amount: 300, Currency: "USD", Kind: contract.KindTransfer},
		{TransferID: uuid.NewString(), FromWalletID: "c", ToWalletID: "ext", Amount: 70, Currency: "EUR", Kind: contract.KindWithdrawal},
	}
	data := contract.TransferBatchCompleted{BatchID: uuid.NewString(), Transfers: legs, CreatedAt: at}
	batch, err := gl.BatchEntry(batchEnvelope(t, contract.TypeTransferBatchCompleted, data), gl.DefaultRules())
	require.NoError(t, err)
	for i := range batch.Lines {
		batch.Lines[i].ID = int64(i + 1)
	}
	rev = contract.TransferBatchReversed{BatchReversalID: uuid.NewString(), BatchID: data.BatchID, CreatedAt: at.Add(time.Hour)}
	for _, leg := range []contract.BatchLeg{legs[0], legs[2]} {
		rev.Reversals = append(rev.Reversals, contract.BatchLegReversal{ReversalID: uuid.NewString(), TransferID: leg.TransferID,
			FromWalletID: leg.ToWalletID, ToWalletID: leg.FromWalletID, Amount: leg.Amount, Currency: leg.Currency})
	}
	reversal, err = gl.BatchReversalEntry(uuid.NewString(), rev, batch, map[int64]bool{})
	require.NoError(t, err)
	return legs, batch, rev, reversal
}

// walletSide is the wallet's listing of the batch's legs and leg reversals, as
// reconcile_transfers_v4 keys them.
func walletSide(legs []contract.BatchLeg, batch gl.Entry, rev contract.TransferBatchReversed) []gl.SourceTransfer {
	var out []gl.SourceTransfer
	for _, leg := range legs {
		out = append(out, gl.SourceTransfer{ID: leg.TransferID, Amount: leg.Amount, Currency: leg.Currency, Kind: leg.Kind, EntryKey: batch.TransferID})
	}
	for _, r := range rev.Reversals {
		out = append(out, gl.SourceTransfer{ID: r.ReversalID, Amount: r.Amount, Currency: r.Currency, ReversesTransferID: r.TransferID, EntryKey: rev.BatchReversalID})
	}
	return out
}

func TestABatchEntryBalancesPerCurrencyAndItsReversalSwapsTheChosenLegs(t *testing.T) {
	t.Parallel()
	_, batch, _, reversal := postedBatch(t)
	require.Equal(t, gl.MultiCurrency, batch.Currency)
	require.True(t, batch.Balanced())
	require.True(t, reversal.Balanced())
	require.Len(t, reversal.Lines, 4)
	require.Equal(t, batch.ID, reversal.ReversesEntryID)

	crossed := batch
	crossed.Lines = append([]gl.Line(nil), batch.Lines...)
	crossed.Lines[0].Currency = "EUR" // USD debits no longer meet USD credits
	require.False(t, crossed.Balanced())
	single := batch
	single.Currency = "USD"
	require.False(t, single.Balanced(), "EUR lines on a USD entry")
}

func TestReconcileMatchesEachLegToItsBatchEntrysLines(t *testing.T) {
	t.Parallel()
	rules := gl.DefaultRules()
	legs, batch, rev, reversal := postedBatch(t)
	wallet := walletSide(legs, batch, rev)
	entries := []gl.Entry{batch, reversal}
	r := gl.Reconcile(rules, wallet, entries)
	require.True(t, r.Agree(), "%+v", r.Differences)

	diffs := func(r gl.Reconciliation) map[string]string {
		out := map[string]string{}
		for _, d := range r.Differences {
			out[d.TransferID] = d.Kind
		}
		return out
	}
	// The wallet's second leg with another amount, a leg the GL lacks, a GL leg the wallet
	// lacks: each reported by its leg's id.
	changed := append([]gl.SourceTransfer(nil), wallet...)
	changed[1].Amount = 301
	ghost := gl.SourceTransfer{ID: uuid.NewString(), Amount: 5, Currency: "USD", Kind: contract.KindTransfer, EntryKey: batch.TransferID}
	changed = append(changed, ghost)
	require.Equal(t, map[string]string{legs[1].TransferID: gl.DiffMismatch, ghost.ID: gl.DiffMissing}, diffs(gl.Reconcile(rules, changed, entries)))

	withoutLeg := append(append([]gl.SourceTransfer(nil), wallet[:2]...), wallet[3:]...) // the EUR leg
	require.Equal(t, map[string]string{legs[2].TransferID: gl.DiffExtra, rev.Reversals[1].ReversalID: gl.DiffMismatch},
		diffs(gl.Reconcile(rules, withoutLeg, entries)), "the leg's reversal reverses a leg the wallet does not list")

	wrongKind := append([]gl.SourceTransfer(nil), wallet...)
	wrongKind[0].Kind = contract.KindWithdrawal
	require.Equal(t, map[string]string{legs[0].TransferID: gl.DiffMismatch}, diffs(gl.Reconcile(rules, wrongKind, entries)))

	require.Equal(t, map[string]string{rev.Reversals[0].ReversalID: gl.DiffMissing, rev.Reversals[1].ReversalID: gl.DiffMissing},
		diffs(gl.Reconcile(rules, wallet, entries[:1])), "the batch reversal's entry is missing")
}

func TestABatchReversalRefusesLegsOutsideTheBatchOrReversedBefore(t *testing.T) {
	t.Parallel()
	legs, batch, rev, _ := postedBatch(t)
	taken := map[int64]bool{}
	_, err := gl.BatchReversalEntry(uuid.NewString(), rev, batch, taken)
	require.NoError(t, err)
	_, err = gl.BatchReversalEntry(uuid.NewString(), rev, batch, taken)
	require.ErrorIs(t, err, contract.ErrConflict, "the same legs again in one transaction")

	batch.Lines[0].Reversed = true
	_, err = gl.BatchReversalEntry(uuid.NewString(), rev, batch, map[int64]bool{})
	require.ErrorIs(t, err, contract.ErrConflict, "a leg the ledger shows reversed")

	other := rev
	other.Reversals = []contract.BatchLegReversal{{ReversalID: uuid.NewString(), TransferID: uuid.NewString(), FromWalletID: "b", ToWalletID: "a", Amount: legs[1].Amount, Currency: "USD"}}
	_, err = gl.BatchReversalEntry(uuid.NewString(), other, batch, map[int64]bool{})
	require.ErrorIs(t, err, contract.ErrConflict, "a transfer that is no leg of the batch")
}
