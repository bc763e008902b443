package contract_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
)

func validBatch() contract.TransferBatchCompleted {
	return contract.TransferBatchCompleted{BatchID: "b", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Transfers: []contract.BatchLeg{
		{TransferID: "t1", FromWalletID: "a", ToWalletID: "b", Amount: 10, Currency: "EUR", Kind: contract.KindTransfer},
		{TransferID: "t2", FromWalletID: "a", ToWalletID: "fees", Amount: 1, Currency: "EUR", Kind: contract.KindTransfer},
	}}
}

func TestABatchIsRefusedPermanentlyForAnyBadLeg(t *testing.T) {
	t.Parallel()
	require.NoError(t, validBatch().Validate())
	for name, spoil := range map[string]func(*contract.TransferBatchCompleted){
		"no id":        func(b *contract.TransferBatchCompleted) { b.BatchID = "" },
		"no legs":      func(b *contract.TransferBatchCompleted) { b.Transfers = nil },
		"leg id twice": func(b *contract.TransferBatchCompleted) { b.Transfers[1].TransferID = "t1" },
		"leg is batch": func(b *contract.TransferBatchCompleted) { b.Transfers[0].TransferID = "b" },
		"zero amount":  func(b *contract.TransferBatchCompleted) { b.Transfers[1].Amount = 0 },
		"no kind":      func(b *contract.TransferBatchCompleted) { b.Transfers[0].Kind = "" },
		"currency":     func(b *contract.TransferBatchCompleted) { b.Transfers[1].Currency = "ZZZ" },
		"no time":      func(b *contract.TransferBatchCompleted) { b.CreatedAt = time.Time{} },
		"bad metadata": func(b *contract.TransferBatchCompleted) { b.Metadata = map[string]string{"a b": "c"} },
		"too many legs": func(b *contract.TransferBatchCompleted) {
			for i := len(b.Transfers); i <= contract.MaxBatchLegs; i++ {
				b.Transfers = append(b.Transfers, contract.BatchLeg{TransferID: fmt.Sprint("x", i), FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "EUR", Kind: contract.KindTransfer})
			}
		},
	} {
		b := validBatch()
		b.Transfers = append([]contract.BatchLeg(nil), b.Transfers...)
		spoil(&b)
		err := b.Validate()
		require.Error(t, err, name)
		require.True(t, errors.Is(err, contract.ErrMalformed), "%s: %v", name, err)
	}
}

func TestABatchReversalIsRefusedPermanentlyForAnyBadLeg(t *testing.T) {
	t.Parallel()
	valid := func() contract.TransferBatchReversed {
		return contract.TransferBatchReversed{BatchReversalID: "br", BatchID: "b", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			Reversals: []contract.BatchLegReversal{
				{ReversalID: "r1", TransferID: "t1", FromWalletID: "b", ToWalletID: "a", Amount: 10, Currency: "EUR"},
				{ReversalID: "r2", TransferID: "t2", FromWalletID: "fees", ToWalletID: "a", Amount: 1, Currency: "EUR"},
			}}
	}
	require.NoError(t, valid().Validate())
	for name, spoil := range map[string]func(*contract.TransferBatchReversed){
		"own id is batch":   func(b *contract.TransferBatchReversed) { b.BatchReversalID = "b" },
		"no batch":          func(b *contract.TransferBatchReversed) { b.BatchID = "" },
		"no legs":           func(b *contract.TransferBatchReversed) { b.Reversals = nil },
		"leg twice":         func(b *contract.TransferBatchReversed) { b.Reversals[1].TransferID = "t1" },
		"reversal id twice": func(b *contract.TransferBatchReversed) { b.Reversals[1].ReversalID = "r1" },
		"zero amount":       func(b *contract.TransferBatchReversed) { b.Reversals[0].Amount = 0 },
	} {
		b := valid()
		b.Reversals = append([]contract.BatchLegReversal(nil), b.Reversals...)
		spoil(&b)
		err := b.Validate()
		require.Error(t, err, name)
		require.True(t, errors.Is(err, contract.ErrMalformed), "%s: %v", name, err)
	}
}
