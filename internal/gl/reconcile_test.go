package gl_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

func entry(transferID string, amount int64, debit, credit string) gl.Entry {
	return gl.Entry{ID: uuid.New(), TransferID: transferID, Currency: "USD", Lines: []gl.Line{
		{AccountCode: debit, Direction: gl.Debit, Amount: amount},
		{AccountCode: credit, Direction: gl.Credit, Amount: amount},
	}}
}

func TestReconcileFindsEveryKindOfDifference(t *testing.T) {
	t.Parallel()
	rule := gl.DefaultPostingRule
	transfers := []gl.SourceTransfer{
		{ID: "ok", Amount: 10, Currency: "USD"},
		{ID: "twice", Amount: 10, Currency: "USD"},
		{ID: "wrong-account", Amount: 10, Currency: "USD"},
		{ID: "wrong-currency", Amount: 10, Currency: "EUR"},
		{ID: "never", Amount: 10, Currency: "USD"},
	}
	entries := []gl.Entry{
		entry("ok", 10, "1010", "2010"),
		entry("twice", 10, "1010", "2010"), entry("twice", 10, "1010", "2010"),
		entry("wrong-account", 10, "1010", "9999"),
		entry("wrong-currency", 10, "1010", "2010"),
		entry("stranger", 10, "1010", "2010"),
	}
	r := gl.Reconcile(rule, transfers, entries)
	require.False(t, r.Agree())
	kinds := map[string]string{}
	for _, d := range r.Differences {
		kinds[d.TransferID] = d.Kind
	}
	require.Equal(t, map[string]string{
		"twice": gl.DiffDuplicate, "wrong-account": gl.DiffMismatch, "wrong-currency": gl.DiffMismatch,
		"never": gl.DiffMissing, "stranger": gl.DiffExtra,
	}, kinds)

	require.True(t, gl.Reconcile(rule, transfers[:1], entries[:1]).Agree())
}
