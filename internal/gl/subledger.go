package gl

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"walletgl/internal/money"
)

// Per-wallet sub-ledgers. The control accounts of wallets (accounts.wallet_control: 2010 and
// 2020 in the seed chart) hold every wallet's money; each line on them names its wallet, so a
// wallet's sub-account of a control account is the account's lines that name it, and the
// control account is the sum of its sub-accounts (gl verify checks it).

// WalletLines names the wallet on each line's side of a movement from one wallet to another:
// a debit takes money from the payer (from), a credit gives it to the payee (to). A hold's
// lines, placement and release, are both its wallet's (from = to).
func WalletLines(lines []Line, from, to string) []Line {
	for i := range lines {
		if lines[i].Direction == Debit {
			lines[i].WalletID = from
		} else {
			lines[i].WalletID = to
		}
	}
	return lines
}

// SubLedger is one wallet's sub-account of one control account in one currency, in the
// account's normal-balance sign. WalletID "" gathers the lines that name no wallet.
type SubLedger struct {
	AccountCode string
	WalletID    string
	Currency    string
	Balance     Sum
}

// SourceWallet is a wallet's balance and held amount as the wallet recorded them.
type SourceWallet struct {
	ID            string
	Currency      string
	Balance       int64
	Held          int64
	AllowNegative bool // an external wallet: its money is outside what the customers are owed
}

// SourceMovement is what one movement (keyed as the journal keys it: a transfer or reversal
// id, hold:<id>:placed, hold:<id>:released) did to one wallet.
type SourceMovement struct {
	ID            string
	WalletID      string
	Currency      string
	BalanceChange int64
	HeldChange    int64
}

// WalletSnapshot is every wallet and every movement, read in one snapshot of the wallet.
type WalletSnapshot struct {
	Wallets   []SourceWallet
	Movements []SourceMovement
}

// BalanceSource is a wallet side that publishes its balances (postgres.WalletView):
// ErrNoBalances when the wallet does not.
type BalanceSource interface {
	WalletSnapshot(ctx context.Context) (WalletSnapshot, error)
}

// ErrNoBalances is a BalanceSource's answer when the wallet does not publish its balances.
var ErrNoBalances = errors.New("the wallet does not publish its balances")

// SubLedgerReader opens a consistent snapshot of the GL's sub-ledgers (postgres.Ledger).
type SubLedgerReader interface {
	SubLedgerSnapshot(ctx context.Context) (SubLedgerSnapshot, error)
}

// SubLedgerSnapshot is the GL's sub-ledgers as one snapshot saw them, kept open so that the
// same snapshot can say which movements it had posted.
type SubLedgerSnapshot interface {
	SubLedgers() []SubLedger
	// Posted returns the movement keys among ids that the snapshot holds an entry for.
	Posted(ctx context.Context, ids []string) (map[string]bool, error)
	Close(ctx context.Context)
}

// BalanceDifference is a wallet whose balance or held amount in the wallet differs from its
// sub-ledger in the GL.
type BalanceDifference struct {
	WalletID string `json:"wallet_id"`
	Currency string `json:"currency"`
	Figure   string `json:"figure"` // FigureBalance or FigureHeld
	Wallet   Sum    `json:"wallet"` // the wallet's figure, less the movements the GL has not posted
	GL       Sum    `json:"gl"`     // the GL's figure: the wallet's sub-accounts
	Detail   string `json:"detail"`
}

// The figures compared for each wallet.
const (
	// FigureBalance: the wallet's balance against its sub-accounts of every control account
	// (available and held alike); an external wallet's must be 0.
	FigureBalance = "balance"
	// FigureHeld: the wallet's held amount against its sub-account of the hold account.
	FigureHeld = "held"
)

// BalanceComparison is the outcome of CompareBalances.
type BalanceComparison struct {
	Wallets     int                 // wallets compared
	InFlight    int                 // movements of the wallet left out: the GL has not posted them
	Differences []BalanceDifference // by wallet, currency and figure
}

// CompareBalances compares every wallet of snap, and every wallet the GL has a sub-account
// for, with its sub-ledger in subs. Both sides stand at one point: the GL's snapshot, read
// first, and the wallet's, read after it, so every movement the GL posted is in the wallet's;
// the movements of the wallet that posted (its keys) does not hold are in flight, and are
// taken out of the wallet's figures. A wallet's balance is compared with the sum of its
// sub-accounts of every control account (an external wallet's, AllowNegative, with 0: its
// money is not owed to it), its held amount with its sub-account of holdAccount. Lines that
// name no wallet belong to no wallet here; gl verify reports them.
func CompareBalances(subs []SubLedger, holdAccount string, snap WalletSnapshot, posted map[string]bool) BalanceComparison {
	type key struct{ wallet, currency string }
	type figures struct{ balance, held Sum }
	walletSide := map[key]*figures{}
	glSide := map[key]*figures{}
	at := func(m map[key]*figures, k key) *figures {
		if f, ok := m[k]; ok {
			return f
		}
		f := &figures{}
		m[k] = f
		return f
	}
	for _, w := range snap.Wallets {
		f := at(walletSide, key{w.ID, w.Currency})
		if !w.AllowNegative {
			f.balance = SumOf(w.Balance)
		}
		f.held = SumOf(w.Held)
	}
	allowNegative := map[string]bool{}
	for _, w := range snap.Wallets {
		allowNegative[w.ID] = w.AllowNegative
	}
	var cmp BalanceComparison
	inFlight := map[string]bool{}
	for _, m := range snap.Movements {
		if posted[m.ID] {
			continue
		}
		inFlight[m.ID] = true
		f := at(walletSide, key{m.WalletID, m.Currency})
		if !allowNegative[m.WalletID] {
			f.balance = f.balance.Sub(SumOf(m.BalanceChange))
		}
		f.held = f.held.Sub(SumOf(m.HeldChange))
	}
	for _, s := range subs {
		if s.WalletID == "" {
			continue
		}
		f := at(glSide, key{s.WalletID, s.Currency})
		f.balance = f.balance.Add(s.Balance)
		if s.AccountCode == holdAccount {
			f.held = f.held.Add(s.Balance)
		}
	}
	keys := make([]key, 0, len(walletSide)+len(glSide))
	for k := range walletSide {
		keys = append(keys, k)
	}
	for k := range glSide {
		if _, ok := walletSide[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].wallet != keys[j].wallet {
			return keys[i].wallet < keys[j].wallet
		}
		return keys[i].currency < keys[j].currency
	})
	cmp.Wallets = len(snap.Wallets)
	cmp.InFlight = len(inFlight)
	for _, k := range keys {
		w, g := at(walletSide, k), at(glSide, k)
		for _, fig := range []struct {
			name          string
			wallet, gl    Sum
			glAccounts    string
			walletMeaning string
		}{
			{FigureBalance, w.balance, g.balance, "its sub-accounts of the wallet control accounts", "balance"},
			{FigureHeld, w.held, g.held, "its sub-account of " + holdAccount, "held amount"},
		} {
			if fig.wallet.Equal(fig.gl) {
				continue
			}
			cmp.Differences = append(cmp.Differences, BalanceDifference{
				WalletID: k.wallet, Currency: k.currency, Figure: fig.name, Wallet: fig.wallet, GL: fig.gl,
				Detail: fmt.Sprintf("%s %s in the wallet, %s %s in the GL (%s)", fig.walletMeaning,
					money.FormatDigits(fig.wallet.String(), k.currency), money.FormatDigits(fig.gl.String(), k.currency), k.currency, fig.glAccounts),
			})
		}
	}
	return cmp
}

// compareBalances reads the GL's sub-ledgers in one snapshot, then the wallet's balances and
// movements in one snapshot of its own, asks the GL's snapshot which of those movements it had
// posted, and compares (CompareBalances). compared is false when either side cannot tell.
func compareBalances(ctx context.Context, src TransferSource, ledger SubLedgerReader) (cmp BalanceComparison, compared bool, err error) {
	bs, ok := src.(BalanceSource)
	if !ok || ledger == nil {
		return BalanceComparison{}, false, nil
	}
	snap, err := ledger.SubLedgerSnapshot(ctx)
	if err != nil {
		return BalanceComparison{}, false, fmt.Errorf("read the GL's sub-ledgers: %w", err)
	}
	defer snap.Close(ctx)
	wallet, err := bs.WalletSnapshot(ctx)
	if errors.Is(err, ErrNoBalances) {
		return BalanceComparison{}, false, nil
	}
	if err != nil {
		return BalanceComparison{}, false, fmt.Errorf("read the wallet's balances: %w", err)
	}
	ids := make([]string, 0, len(wallet.Movements))
	for _, m := range wallet.Movements {
		ids = append(ids, m.ID)
	}
	posted, err := snap.Posted(ctx, ids)
	if err != nil {
		return BalanceComparison{}, false, fmt.Errorf("find the wallet's movements the GL posted: %w", err)
	}
	return CompareBalances(snap.SubLedgers(), DefaultHoldRules.HoldAccount(), wallet, posted), true, nil
}
