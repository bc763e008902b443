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
	rulesSetHelp  = "add a posting rule: --event-type T --kind K [--currency C] --debit A --credit B [--effective-from RFC3339, default now] [--json]; " +
		"it takes effect at or after now and after every entry posted under T and K (in C), never rewriting one; audited"
	rulesWithdrawHelp = "withdraw a posting rule that is not in effect yet: --event-type T --kind K [--currency C] --effective-from RFC3339 [--json]; audited"
)

type ruleJSON struct {
	EventType     string `json:"event_type"`
	Kind          string `json:"kind"`
	Currency      string `json:"currency,omitempty"` // absent: the rule of any currency
	EffectiveFrom string `json:"effective_from"`     // RFC 3339, or "-infinity" for a seed rule
	DebitAccount  string `json:"debit_account"`
	CreditAccount string `json:"credit_account"`
	CreatedAt     string `json:"created_at"`
}

func toRuleJSON(r gl.Rule) ruleJSON {
	return ruleJSON{
		EventType: r.EventType, Kind: r.Kind, Currency: r.Currency, EffectiveFrom: effectiveString(r.EffectiveFrom),
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
			rows = append(rows, []string{r.EventType, r.Kind, currencyString(r.Currency), r.EffectiveFrom, r.DebitAccount, r.CreditAccount})
		}
		return cli.Table(env.Stdout, []string{"EVENT TYPE", "KIND", "CURRENCY", "EFFECTIVE FROM", "DEBIT", "CREDIT"}, rows)
	})
}

// currencyString shows a rule's currency: "any" for the rule of any currency.
func currencyString(c string) string {
	if c == "" {
		return "any"
	}
	return c
}

// ruleFlags are the flags naming a rule, shared by gl rules set and gl rules withdraw.
func ruleFlags(s *config.Set, rule *gl.Rule, effective *string) {
	s.Flags().StringVar(&rule.EventType, "event-type", "", "the event type, with its version (TransferCompleted.v2, ...)")
	s.Flags().StringVar(&rule.Kind, "kind", "", "the movement's kind (deposit, transfer, withdrawal; unspecified for TransferCompleted.v1; hold)")
	s.Flags().StringVar(&rule.Currency, "currency", "", "the ISO 4217 currency of the events the rule posts (default: any currency; a currency's rule in force comes first)")
	s.Flags().StringVar(effective, "effective-from", "", "RFC 3339 time from which the rule posts events (by their own time)")
}

// parseEffective reads --effective-from into rule; "" leaves it zero.
func parseEffective(cmd, effective string, rule *gl.Rule) error {
	if effective == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, effective)
	if err != nil {
		return fmt.Errorf("%s: --effective-from %q: want an RFC 3339 time: %w", cmd, effective, err)
	}
	rule.EffectiveFrom = t
	return nil
}

// rulesSetCmd adds a posting rule, checked against the chart of accounts and refused when it
// would take effect in the past (postgres.Ledger.SetRule), audited as the operator's.
func rulesSetCmd(ctx context.Context, env cli.Env, args []string) error {
	var asJSON bool
	var rule gl.Rule
	var effective string
	cfg, rest, err := service.Parse(env, args, func(s *config.Set) {
		cli.JSONFlag(s, &asJSON)
		ruleFlags(s, &rule, &effective)
		s.Flags().StringVar(&rule.DebitAccount, "debit", "", "the account debited")
		s.Flags().StringVar(&rule.CreditAccount, "credit", "", "the account credited")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("rules set: unexpected arguments %q", rest)
	}
	if err := parseEffective("rules set", effective, &rule); err != nil {
		return err
	}
	if err := rule.Validate(); err != nil {
		return fmt.Errorf("rules set: %w", err)
	}
	pool, err := cli.OpenDatabase(ctx, cfg.DatabaseURL, cli.ReadWrite)
	if err != nil {
		return err
	}
	defer pool.Close()
	set, err := postgres.NewLedger(pool).WithAudit(cli.AuditCommand).SetRule(ctx, rule)
	if err != nil {
		return fmt.Errorf("rules set: %w", err)
	}
	if asJSON {
		return cli.JSON(env.Stdout, toRuleJSON(set))
	}
	fmt.Fprintf(env.Stdout, "set rule %s kind %s currency %s from %s: debit %s, credit %s\n",
		set.EventType, set.Kind, currencyString(set.Currency), effectiveString(set.EffectiveFrom), set.DebitAccount, set.CreditAccount)
	return nil
}

// rulesWithdrawCmd deletes a posting rule that has not taken effect (postgres.Ledger.WithdrawRule),
// audited as the operator's.
func rulesWithdrawCmd(ctx context.Context, env cli.Env, args []string) error {
	var asJSON bool
	var key gl.Rule
	var effective string
	cfg, rest, err := service.Parse(env, args, func(s *config.Set) {
		cli.JSONFlag(s, &asJSON)
		ruleFlags(s, &key, &effective)
	})
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return fmt.Errorf("rules withdraw: unexpected arguments %q", rest)
	case key.EventType == "" || key.Kind == "" || effective == "":
		return fmt.Errorf("rules withdraw: --event-type, --kind and --effective-from name the rule and are required (gl rules list)")
	}
	if err := parseEffective("rules withdraw", effective, &key); err != nil {
		return err
	}
	pool, err := cli.OpenDatabase(ctx, cfg.DatabaseURL, cli.ReadWrite)
	if err != nil {
		return err
	}
	defer pool.Close()
	withdrawn, err := postgres.NewLedger(pool).WithAudit(cli.AuditCommand).WithdrawRule(ctx, key)
	if err != nil {
		return fmt.Errorf("rules withdraw: %w", err)
	}
	if asJSON {
		return cli.JSON(env.Stdout, toRuleJSON(withdrawn))
	}
	fmt.Fprintf(env.Stdout, "withdrew rule %s kind %s currency %s from %s: debit %s, credit %s\n",
		withdrawn.EventType, withdrawn.Kind, currencyString(withdrawn.Currency), effectiveString(withdrawn.EffectiveFrom),
		withdrawn.DebitAccount, withdrawn.CreditAccount)
	return nil
}
