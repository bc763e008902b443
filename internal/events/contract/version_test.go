package contract_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
)

func TestTransferEventTypeForSendsAsV1OnlyWhatV1CarriesExactly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, published, kind, want string
	}{
		{"a deposit under v1 goes as v1", contract.TypeTransferCompleted, contract.KindDeposit, contract.TypeTransferCompleted},
		{"a wallet-to-wallet transfer under v1 goes as v2", contract.TypeTransferCompleted, contract.KindTransfer, contract.TypeTransferCompletedV2},
		{"a withdrawal under v1 goes as v2", contract.TypeTransferCompleted, contract.KindWithdrawal, contract.TypeTransferCompletedV2},
		{"a deposit under v2 goes as v2", contract.TypeTransferCompletedV2, contract.KindDeposit, contract.TypeTransferCompletedV2},
		{"a transfer under v2 goes as v2", contract.TypeTransferCompletedV2, contract.KindTransfer, contract.TypeTransferCompletedV2},
		{"a withdrawal under v2 goes as v2", contract.TypeTransferCompletedV2, contract.KindWithdrawal, contract.TypeTransferCompletedV2},
	} {
		require.Equal(t, tc.want, contract.TransferEventTypeFor(tc.published, tc.kind), tc.name)
	}
}
