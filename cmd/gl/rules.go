package main

import (
	"context"
	"fmt"
	"time"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

const (
	rulesListHelp = "list the posting rules: event type and kind -> debit and credit account, by effective_from [--json]"
	rulesSetHelp  = "add a posting rule: --event-type T --kind K --debit A --credit B [--effective-from RFC3339, default now] [--json]; " +
		"it takes effect at or after now and after every entry posted under T and K, never rewriting one"
)

type ruleJSON struct {
	EventType     string `json:"event_type"`
	Kind          string `json:"kind"`
	EffectiveFrom string `json:"effective_from"` // RFC 3339, or "-infinity" for a seed rule
	DebitAccount  string `json:"debit_account"`
	CreditAccount string `json:"credit_account"`
	CreatedAt     string `json:"created_at"`
}

func toRuleJSON(r gl.Rule) ruleJSON {
	return ruleJSON{
		EventType: r.EventType, Kind: r.Kind, EffectiveFrom: effectiveString(r.EffectiveFrom),
		DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount, CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
}

// effectiveString shows a rule's effective_from: the zero time is the seed rules' -infinity.
func effectiveString(t time.Time) string {
	if t.IsZero() {
		return "-infinity"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// rulesListCmd lists every posting rule, the superseded ones too: they still say how the
// entries of their time were posted.
func rulesListCmd(ctx context.Context, env cli.Env, args []string) error {
	return service.Run(ctx, env, args, cli.ReadOnly, nil, func(c cli.Call[*Config]) error {
		rules, err := postgres.NewLedger(c.Pool).Rules(ctx)
		if err != nil {
			return err
		}
		out := make([]ruleJSON, 0, len(rules.All()))
		for _, r := range rules.All() {
			out = append(out, toRuleJSON(r))
		}
		if c.JSON {
			return cli.JSON(env.Stdout, map[string]any{"rules": out})
		}
		rows := make([][]string, 0, len(out))
		for _, r := range out {
			rows = append(rows, []string{r.EventType, r.Kind, r.EffectiveFrom, r.DebitAccount, r.CreditAccount})
		}
		return cli.Table(env.Stdout, []string{"EVENT TYPE", "KIND", "EFFECTIVE FROM", "DEBIT", "CREDIT"}, rows)
	})
}

// rulesSetCmd adds a posting rule, checked against the chart of accounts and refused when it
// would take effect in the past (postgres.Ledger.SetRule).
func rulesSetCmd(ctx context.Context, env cli.Env, args []string) error {
	var asJSON bool
	var rule gl.Rule
	var effective string
	cfg, rest, err := service.Parse(env, args, func(s *config.Set) {
		cli.JSONFlag(s, &asJSON)
		s.Flags().StringVar(&rule.EventType, "event-type", "", "the event type, with its version (TransferCompleted.v2, ...)")
		s.Flags().StringVar(&rule.Kind, "kind", "", "the movement's kind (deposit, transfer, withdrawal; unspecified for TransferCompleted.v1; hold)")
		s.Flags().StringVar(&rule.DebitAccount, "debit", "", "the account debited")
		s.Flags().StringVar(&rule.CreditAccount, "credit", "", "the account credited")
		s.Flags().StringVar(&effective, "effective-from", "", "RFC 3339 time from which the rule posts events (by their own time); default now")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("rules set: unexpected arguments %q", rest)
	}
	if effective != "" {
		if rule.EffectiveFrom, err = time.Parse(time.RFC3339Nano, effective); err != nil {
			return fmt.Errorf("rules set: --effective-from %q: want an RFC 3339 time: %w", effective, err)
		}
	}
	if err := rule.Validate(); err != nil {
		return fmt.Errorf("rules set: %w", err)
	}
	pool, err := cli.OpenDatabase(ctx, cfg.DatabaseURL, cli.ReadWrite)
	if err != nil {
		return err
	}
	defer pool.Close()
	set, err := postgres.NewLedger(pool).SetRule(ctx, rule)
	if err != nil {
		return fmt.Errorf("rules set: %w", err)
	}
	if asJSON {
		return cli.JSON(env.Stdout, toRuleJSON(set))
	}
	fmt.Fprintf(env.Stdout, "set rule %s kind %s from %s: debit %s, credit %s\n",
		set.EventType, set.Kind, effectiveString(set.EffectiveFrom), set.DebitAccount, set.CreditAccount)
	return nil
}
