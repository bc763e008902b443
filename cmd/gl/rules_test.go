package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

func TestRulesCommands(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)

	out, _, err := runGL(t, env, "rules", "list")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 8, out) // the header and the seven seed rules
	require.Regexp(t, `^EVENT TYPE\s+KIND\s+CURRENCY\s+EFFECTIVE FROM\s+DEBIT\s+CREDIT$`, lines[0])
	require.Contains(t, out, "TransferCompleted.v1  unspecified")
	require.Regexp(t, `TransferCompleted.v2\s+transfer\s+any\s+-infinity\s+2010\s+2010`, out)

	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown event type", []string{"--event-type", "TransferCompleted.v9", "--kind", "deposit", "--debit", "1010", "--credit", "2010"}, `event type "TransferCompleted.v9" is not posted by rule`},
		{"an unknown kind", []string{"--event-type", "TransferCompleted.v2", "--kind", "gift", "--debit", "1010", "--credit", "2010"}, `kind "gift" is not a kind of TransferCompleted.v2`},
		{"an account outside the chart", []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--debit", "9999", "--credit", "2010"}, `account "9999"`},
		{"one account for a deposit", []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--debit", "2010", "--credit", "2010"}, "only kind transfer may post to one account"},
		{"the past", []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--debit", "1010", "--credit", "2010", "--effective-from", "2020-01-01T00:00:00Z"}, "is before now"},
		{"a currency that is no ISO 4217 code", []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--currency", "ZZZ", "--debit", "1010", "--credit", "2010"}, `currency "ZZZ" is not an upper-case ISO 4217 currency code`},
		{"a time that is no time", []string{"--event-type", "TransferCompleted.v2", "--kind", "deposit", "--debit", "1010", "--credit", "2010", "--effective-from", "tomorrow"}, "want an RFC 3339 time"},
	}
	for _, r := range refusals {
		_, _, err := runGL(t, env, append([]string{"rules", "set"}, r.args...)...)
		require.ErrorContains(t, err, r.want, r.name)
	}

	from := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out, _, err = runGL(t, env, "rules", "set", "--event-type", "TransferCompleted.v2", "--kind", "transfer",
		"--debit", "2010", "--credit", "2020", "--effective-from", from.Format(time.RFC3339), "--json")
	require.NoError(t, err)
	var set ruleJSON
	require.NoError(t, json.Unmarshal([]byte(out), &set))
	require.Equal(t, ruleJSON{EventType: "TransferCompleted.v2", Kind: "transfer", EffectiveFrom: from.Format(time.RFC3339Nano),
		DebitAccount: "2010", CreditAccount: "2020", CreatedAt: set.CreatedAt}, set)

	out, _, err = runGL(t, env, "rules", "list", "--json")
	require.NoError(t, err)
	var listed struct {
		Rules []ruleJSON `json:"rules"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed.Rules, 8, "the old rule stays: it posted the entries of its time")

	// The rules table is append-only, even for the service's own role.
	_, err = pool.Exec(context.Background(), `UPDATE posting_rules SET debit_account = '1010'`)
	require.ErrorContains(t, err, "append-only")
}

func TestConfiguredTransferAccountsMustMatchTheRules(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	ledger := postgres.NewLedger(pool)
	require.NoError(t, checkConfiguredRule(ctx, gl.DefaultPostingRule, ledger), "the defaults are the seed")

	err := checkConfiguredRule(ctx, gl.PostingRule{DebitAccount: "2010", CreditAccount: "1010"}, ledger)
	require.ErrorContains(t, err, "GL_TRANSFER_DEBIT_ACCOUNT/GL_TRANSFER_CREDIT_ACCOUNT say debit 2010 credit 1010, but the posting rules say debit 1010 credit 2010")
	require.ErrorContains(t, err, "gl rules set --event-type TransferCompleted.v1 --kind unspecified --debit 2010 --credit 1010")

	_, _, err = runGL(t, glEnv(dbURL), "rules", "set", "--event-type", "TransferCompleted.v1", "--kind", "unspecified", "--debit", "2010", "--credit", "1010")
	require.NoError(t, err)
	require.NoError(t, checkConfiguredRule(ctx, gl.PostingRule{DebitAccount: "2010", CreditAccount: "1010"}, ledger))
	require.Error(t, checkConfiguredRule(ctx, gl.DefaultPostingRule, ledger), "the defaults no longer match: the operator is told")
}
