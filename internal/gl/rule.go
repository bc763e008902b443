package gl

import (
	"context"
	"errors"
	"fmt"
)

// PostingRule names the accounts a transfer is posted to: the whole amount is debited to one
// and credited to the other.
type PostingRule struct {
	DebitAccount  string
	CreditAccount string
}

// DefaultPostingRule is the seed system's transfer chart of accounts: cash held for wallets
// (asset) against wallet balances owed to customers (liability).
var DefaultPostingRule = PostingRule{DebitAccount: "1010", CreditAccount: "2010"}

// Check verifies at start-up that both accounts exist in the chart of accounts: a typo in the
// configuration must stop the service, not turn every event into a failed posting.
func (r PostingRule) Check(ctx context.Context, accounts Accounts) error {
	if r.DebitAccount == "" || r.CreditAccount == "" {
		return errors.New("check posting rule: debit and credit accounts must both be set")
	}
	if r.DebitAccount == r.CreditAccount {
		return fmt.Errorf("check posting rule: debit and credit account are both %q", r.DebitAccount)
	}
	for _, code := range []string{r.DebitAccount, r.CreditAccount} {
		if _, err := accounts.Account(ctx, code); err != nil {
			return fmt.Errorf("check posting rule account %q: %w", code, err)
		}
	}
	return nil
}

// lines returns the two lines the rule posts for amount.
func (r PostingRule) lines(amount int64) []Line {
	return []Line{
		{AccountCode: r.DebitAccount, Direction: Debit, Amount: amount},
		{AccountCode: r.CreditAccount, Direction: Credit, Amount: amount},
	}
}
