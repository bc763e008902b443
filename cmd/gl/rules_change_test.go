package main

import (
	"context"
	"encoding/json"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// auditTrail is gl audit list --json, as actor, action and target.
func auditTrail(t *testing.T, env map[string]string) [][3]string {
	t.Helper()
	out, _, err := runGL(t, env, "audit", "list", "--json")
	require.NoError(t, err)
	var rows []struct{ Actor, Action, Target string }
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	trail := make([][3]string, len(rows))
	for i, r := range rows {
		trail[i] = [3]string{r.Actor, r.Action, r.Target}
	}
	return trail
}

func TestRulesSetRefusesAccountsOfTypesTheKindNeverPostsTo(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	_, _, err := runGL(t, env, "accounts", "add", "4010", "--name", "Fee revenue", "--type", "revenue")
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"revenue as a withdrawal's debit", []string{"--kind", "withdrawal", "--debit", "4010", "--credit", "1010"},
			"rule-sides: a withdrawal may not debit account 4010: it is a revenue account; a withdrawal debits a liability account"},
		{"revenue as a deposit's debit", []string{"--kind", "deposit", "--debit", "4010", "--credit", "2010"},
			"a deposit may not debit account 4010: it is a revenue account"},
		{"cash as a deposit's credit", []string{"--kind", "deposit", "--debit", "1010", "--credit", "1010"},
			"only kind transfer may post to one account"},
		{"funds on hold as a withdrawal's credit", []string{"--kind", "withdrawal", "--debit", "2010", "--credit", "2020"},
			"a withdrawal may not credit account 2020: it is a liability account"},
	} {
		_, _, err := runGL(t, env, append([]string{"rules", "set", "--event-type", "TransferCompleted.v2"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	out, _, err := runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "withdrawal", "--debit", "2010", "--credit", "4010")
	require.NoError(t, err, "a withdrawal credited to revenue (a fee) makes sense")
	require.Contains(t, out, "debit 2010, credit 4010")
}

func TestRulesPerCurrency(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	_, _, err := runGL(t, env, "accounts", "add", "1020", "--name", "Cash at the euro bank", "--type", "asset")
	require.NoError(t, err)

	out, _, err := runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "deposit",
		"--currency", "EUR", "--debit", "1020", "--credit", "2010", "--json")
	require.NoError(t, err)
	var set ruleJSON
	require.NoError(t, json.Unmarshal([]byte(out), &set))
	require.Equal(t, "EUR", set.Currency)

	out, _, err = runGL(t, env, "rules", "list")
	require.NoError(t, err)
	require.Regexp(t, `TransferCompleted.v2\s+deposit\s+EUR\s+\S+\s+1020\s+2010`, out)
	require.Regexp(t, `TransferCompleted.v2\s+deposit\s+any\s+-infinity\s+1010\s+2010`, out)

	_, _, err = runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "deposit",
		"--currency", "eur", "--debit", "1020", "--credit", "2010")
	require.ErrorContains(t, err, `currency "eur" is not an upper-case ISO 4217 currency code`)
}

func TestRulesWithdrawBeforeTheRuleTakesEffect(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	ctx := context.Background()
	from := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	key := []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "EUR", "--effective-from", from}

	_, _, err := runGL(t, env, append(append([]string{"rules", "set"}, key...), "--debit", "1010", "--credit", "2010")...)
	require.NoError(t, err)
	_, _, err = runGL(t, env, append(append([]string{"rules", "set"}, key...), "--debit", "1010", "--credit", "2010")...)
	require.ErrorContains(t, err, "rule-exists: a rule for TransferCompleted.v2 kind deposit in EUR from "+from+" exists already")

	out, _, err := runGL(t, env, append([]string{"rules", "withdraw"}, key...)...)
	require.NoError(t, err)
	require.Equal(t, "withdrew rule TransferCompleted.v2 kind deposit currency EUR from "+from+": debit 1010, credit 2010\n", out)
	out, _, err = runGL(t, env, "rules", "list")
	require.NoError(t, err)
	require.NotContains(t, out, "EUR")

	_, _, err = runGL(t, env, append([]string{"rules", "withdraw"}, key...)...)
	require.ErrorContains(t, err, "rule-not-found: no rule for TransferCompleted.v2 kind deposit in EUR from "+from)
	_, _, err = runGL(t, env, "rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "deposit")
	require.ErrorContains(t, err, "--effective-from name the rule and are required")
	_, _, err = runGL(t, env, append(append([]string{"rules", "set"}, key...), "--debit", "1010", "--credit", "2010")...)
	require.NoError(t, err, "a withdrawn rule's key is free again")

	// A rule in effect stays, for gl rules withdraw and for plain SQL alike.
	out, _, err = runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "withdrawal", "--debit", "2010", "--credit", "1010", "--json")
	require.NoError(t, err)
	var now ruleJSON
	require.NoError(t, json.Unmarshal([]byte(out), &now))
	_, _, err = runGL(t, env, "rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "withdrawal", "--effective-from", now.EffectiveFrom)
	require.ErrorContains(t, err, "rule-in-effect: rule TransferCompleted.v2/withdrawal/any@"+now.EffectiveFrom+" is in effect since")
	_, err = pool.Exec(ctx, `DELETE FROM posting_rules WHERE kind = 'withdrawal'`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23001", pgErr.Code, "%v", err)
	require.Contains(t, pgErr.Message, "is in effect and cannot be withdrawn")
	_, err = pool.Exec(ctx, `UPDATE posting_rules SET debit_account = '1010'`)
	require.ErrorContains(t, err, "append-only")

	// A future rule an entry was already posted under (an event whose own time is later) stays.
	var entryAt time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now() + interval '3 hours'`).Scan(&entryAt))
	postFutureDeposit(t, pool, entryAt)
	later := entryAt.Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	_, err = pool.Exec(ctx, `INSERT INTO posting_rules (event_type, kind, effective_from, debit_account, credit_account)
		VALUES ('TransferCompleted.v2', 'deposit', $1, '1010', '2010')`, later)
	require.NoError(t, err, "plain SQL may set a rule gl rules set would refuse")
	_, _, err = runGL(t, env, "rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--effective-from", later)
	require.ErrorContains(t, err, "rule-in-effect")
	require.ErrorContains(t, err, "posted an entry already")
	_, err = pool.Exec(ctx, `DELETE FROM posting_rules WHERE effective_from = $1`, later)
	require.ErrorContains(t, err, "covers an entry already posted")
}

// postFutureDeposit writes a balanced TransferCompleted.v2 deposit entry that occurred at at.
func postFutureDeposit(t *testing.T, pool interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, at time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		WITH e AS (
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, description, occurred_at, event_type, kind)
			VALUES (gen_random_uuid(), 'ev-future', 'tr-future', 'USD', 'a deposit', $1, 'TransferCompleted.v2', 'deposit')
			RETURNING id)
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		SELECT e.id, l.code, l.dir, 5, 'USD', l.wallet FROM e, (VALUES ('1010', 'debit', 'bank'), ('2010', 'credit', 'alice')) AS l(code, dir, wallet)`, at)
	require.NoError(t, err)
}

func TestRuleAndAccountChangesAreAuditedWithTheOperator(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	u, err := user.Current()
	require.NoError(t, err)
	actor := "cli:" + u.Username
	from := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)

	_, _, err = runGL(t, env, "accounts", "add", "1020", "--name", "Cash at the euro bank", "--type", "asset")
	require.NoError(t, err)
	_, _, err = runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "EUR",
		"--debit", "1020", "--credit", "2010", "--effective-from", from)
	require.NoError(t, err)
	_, _, err = runGL(t, env, "rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "EUR",
		"--effective-from", from)
	require.NoError(t, err)
	// Refusals change nothing and record nothing.
	_, _, err = runGL(t, env, "accounts", "add", "1020", "--name", "Again", "--type", "asset")
	require.ErrorContains(t, err, "account-exists")
	_, _, err = runGL(t, env, "rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "EUR",
		"--effective-from", from)
	require.ErrorContains(t, err, "rule-not-found")

	require.Equal(t, [][3]string{
		{actor, "account.add", "1020"},
		{actor, "rule.set", "TransferCompleted.v2/deposit/EUR@" + from},
		{actor, "rule.withdraw", "TransferCompleted.v2/deposit/EUR@" + from},
	}, auditTrail(t, env))
}

func TestRulesAndAccountsCommandsNeverShowARawDatabaseError(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an account name that is not UTF-8", []string{"accounts", "add", "4020", "--name", "Fees \xff", "--type", "revenue"}, "invalid-account"},
		{"an account name with a control character", []string{"accounts", "add", "4020", "--name", "Fees\x1b[31m", "--type", "revenue"}, "invalid-account"},
		{"a debit account that is not UTF-8", []string{"rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--debit", "\xff", "--credit", "2010"}, "invalid-rule"},
		{"a withdrawal of an unknown event type", []string{"rules", "withdraw", "--event-type", "Transfer\xff.v2", "--kind", "deposit", "--effective-from", "2030-01-01T00:00:00Z"}, "invalid-rule"},
		{"a withdrawal in a currency that is no code", []string{"rules", "withdraw", "--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "\xff", "--effective-from", "2030-01-01T00:00:00Z"}, "invalid-currency"},
	} {
		_, _, err := runGL(t, env, tc.args...)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.False(t, strings.Contains(err.Error(), "SQLSTATE"), "%s: %v", tc.name, err)
	}
}
