package gl

import (
	"fmt"

	"walletgl/internal/events/contract"
)

// WalletSeen is what the ledger's lines say of a wallet, as the wallet's allow_negative flag
// would: the GL never sees the flag itself.
type WalletSeen struct {
	// Customer: a line of a wallet control account (2010, 2020) names the wallet in the entry
	// of a transfer or a withdrawal (or a reversal of one). Those kinds are told by the
	// wallet (TransferCompleted.v2), and there the control account's lines name only wallets
	// that may not go negative: the wallet is a customer's.
	Customer bool
	// External: a line of an account that is not a wallet control account (1010, an expense,
	// revenue) names the wallet: the side of a movement that is money outside the system,
	// where a deposit's money came from or a withdrawal's went.
	External bool
}

// CheckDepositV1 refuses, as a conflict, a TransferCompleted.v1 the ledger knows is not a
// deposit. A v1 does not say its kind, and the GL posts it by the rule of its type and kind
// unspecified, which debits cash and credits what is owed to the payee: a deposit. The wallet
// publishes only deposits as v1 (contract.TransferEventTypeFor), but an older wallet published
// every movement as v1. The payload names both wallets, and the ledger's lines say what it has
// seen of them (seen, by wallet id): a v1 whose payer is a customer's wallet moves a customer's
// money (a transfer or a withdrawal), and one whose payee is an external wallet while its payer
// is not known to be one is a withdrawal. A wallet the ledger has seen nothing of gives no
// evidence: the v1 is then posted as a deposit. Any other event type passes.
func CheckDepositV1(env contract.Envelope, seen map[string]WalletSeen) error {
	if env.Type != contract.TypeTransferCompleted {
		return nil
	}
	data, err := contract.DecodeTransferCompleted(env)
	if err != nil {
		return err
	}
	from, to := seen[data.FromWalletID], seen[data.ToWalletID]
	switch {
	case from.Customer:
		return contract.Conflict(fmt.Errorf("event %s (%s, posted only as a deposit) moves transfer %s from wallet %s, which the ledger knows as a customer's wallet "+
			"(on a wallet control account in a transfer or withdrawal): it is not a deposit; the wallet must publish it as %s",
			env.ID, env.Type, data.TransferID, data.FromWalletID, contract.TypeTransferCompletedV2))
	case to.External && !from.External:
		return contract.Conflict(fmt.Errorf("event %s (%s, posted only as a deposit) moves transfer %s to wallet %s, which the ledger knows as an external wallet, "+
			"from wallet %s, which it does not: it is a withdrawal; the wallet must publish it as %s",
			env.ID, env.Type, data.TransferID, data.ToWalletID, data.FromWalletID, contract.TypeTransferCompletedV2))
	}
	return nil
}

// DepositV1Wallets are the wallets the TransferCompleted.v1 events of envs name (payers and
// payees), which CheckDepositV1 needs seen; none when envs hold no v1.
func DepositV1Wallets(envs []contract.Envelope) []string {
	var ids []string
	have := map[string]bool{}
	for _, env := range envs {
		if env.Type != contract.TypeTransferCompleted {
			continue
		}
		data, err := contract.DecodeTransferCompleted(env)
		if err != nil {
			continue // TransferEntry refuses it
		}
		for _, id := range []string{data.FromWalletID, data.ToWalletID} {
			if !have[id] {
				have[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
}
