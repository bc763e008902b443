package gl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

// A wallet's lines name the payer on the debit side and the payee on the credit side.
func TestWalletLinesNameThePayerAndThePayee(t *testing.T) {
	t.Parallel()
	got := gl.WalletLines(lines(5, "2010", "2010"), "alice", "bob")
	require.Equal(t, []gl.Line{
		{AccountCode: "2010", Direction: gl.Debit, Amount: 5, WalletID: "alice"},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 5, WalletID: "bob"},
	}, got)
}

func TestCompareBalancesNamesEachWalletThatDiffers(t *testing.T) {
	t.Parallel()
	sub := func(account, wallet string, balance int64) gl.SubLedger {
		return gl.SubLedger{AccountCode: account, WalletID: wallet, Currency: "USD", Balance: gl.SumOf(balance)}
	}
	// bank (external) deposited 100 to alice; alice paid bob 30; alice holds 20.
	wallets := []gl.SourceWallet{
		{ID: "bank", Currency: "USD", Balance: -100, AllowNegative: true},
		{ID: "alice", Currency: "USD", Balance: 70, Held: 20},
		{ID: "bob", Currency: "USD", Balance: 30},
	}
	movements := []gl.SourceMovement{
		{ID: "t-1", WalletID: "bank", Currency: "USD", BalanceChange: -100},
		{ID: "t-1", WalletID: "alice", Currency: "USD", BalanceChange: 100},
		{ID: "t-2", WalletID: "alice", Currency: "USD", BalanceChange: -30},
		{ID: "t-2", WalletID: "bob", Currency: "USD", BalanceChange: 30},
		{ID: "hold:h:placed", WalletID: "alice", Currency: "USD", HeldChange: 20},
	}
	allPosted := map[string]bool{"t-1": true, "t-2": true, "hold:h:placed": true}
	agreeing := []gl.SubLedger{sub("2010", "alice", 50), sub("2020", "alice", 20), sub("2010", "bob", 30)}

	t.Run("a GL whose sub-ledgers hold every wallet's figures agrees", func(t *testing.T) {
		t.Parallel()
		cmp := gl.CompareBalances(agreeing, "2020", gl.WalletSnapshot{Wallets: wallets, Movements: movements}, allPosted)
		require.Empty(t, cmp.Differences)
		require.Equal(t, 3, cmp.Wallets)
		require.Zero(t, cmp.InFlight)
	})

	t.Run("a movement the GL has not posted is in flight, left out of the wallets' figures", func(t *testing.T) {
		t.Parallel()
		posted := map[string]bool{"t-1": true, "hold:h:placed": true}
		subs := []gl.SubLedger{sub("2010", "alice", 80), sub("2020", "alice", 20)}
		cmp := gl.CompareBalances(subs, "2020", gl.WalletSnapshot{Wallets: wallets, Movements: movements}, posted)
		require.Empty(t, cmp.Differences)
		require.Equal(t, 1, cmp.InFlight)
	})

	t.Run("each differing wallet is named with both figures", func(t *testing.T) {
		t.Parallel()
		// bob's balance changed in the wallet; a withdrawal of bob's 10 to bank posted as the v1
		// mode did (debit 1010, credit 2010: bank's sub-account grows, bob's does not shrink);
		// a fabricated entry credits alice 7.
		changed := append([]gl.SourceWallet(nil), wallets...)
		changed[2].Balance = 31 - 10
		changed[0].Balance = -90
		moves := append(append([]gl.SourceMovement(nil), movements...),
			gl.SourceMovement{ID: "t-3", WalletID: "bob", Currency: "USD", BalanceChange: -10},
			gl.SourceMovement{ID: "t-3", WalletID: "bank", Currency: "USD", BalanceChange: 10})
		posted := map[string]bool{"t-1": true, "t-2": true, "t-3": true, "hold:h:placed": true}
		subs := []gl.SubLedger{sub("2010", "alice", 57), sub("2020", "alice", 20), sub("2010", "bob", 30), sub("2010", "bank", 10)}
		cmp := gl.CompareBalances(subs, "2020", gl.WalletSnapshot{Wallets: changed, Movements: moves}, posted)
		require.Equal(t, []gl.BalanceDifference{
			{WalletID: "alice", Currency: "USD", Figure: gl.FigureBalance, Wallet: gl.SumOf(70), GL: gl.SumOf(77),
				Detail: "balance 0.70 in the wallet, 0.77 USD in the GL (its sub-accounts of the wallet control accounts)"},
			{WalletID: "bank", Currency: "USD", Figure: gl.FigureBalance, Wallet: gl.SumOf(0), GL: gl.SumOf(10),
				Detail: "balance 0.00 in the wallet, 0.10 USD in the GL (its sub-accounts of the wallet control accounts)"},
			{WalletID: "bob", Currency: "USD", Figure: gl.FigureBalance, Wallet: gl.SumOf(21), GL: gl.SumOf(30),
				Detail: "balance 0.21 in the wallet, 0.30 USD in the GL (its sub-accounts of the wallet control accounts)"},
		}, cmp.Differences)
	})

	t.Run("a sub-account of a wallet the wallet does not have is a difference", func(t *testing.T) {
		t.Parallel()
		subs := append(append([]gl.SubLedger(nil), agreeing...), sub("2020", "ghost", 5))
		cmp := gl.CompareBalances(subs, "2020", gl.WalletSnapshot{Wallets: wallets, Movements: movements}, allPosted)
		require.Len(t, cmp.Differences, 2)
		require.Equal(t, "ghost", cmp.Differences[0].WalletID)
		require.Equal(t, gl.FigureBalance, cmp.Differences[0].Figure)
		require.Equal(t, gl.FigureHeld, cmp.Differences[1].Figure)
	})
}
