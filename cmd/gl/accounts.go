package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"walletgl/internal/cli"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/serve"
)

type accountJSON struct {
	Code          string       `json:"code"`
	Name          string       `json:"name"`
	Type          string       `json:"type"`
	NormalBalance gl.Direction `json:"normal_balance"`
}

func accountsListCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, s := loadConfigWith("gl accounts list", env, func(s *flagSet) { s.jsonFlag() })
	if err := s.parse(args, cfg); err != nil {
		return err
	}
	ledger, closeLedger, err := openLedger(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeLedger()
	accounts, err := ledger.Accounts(ctx)
	if err != nil {
		return err
	}
	if s.json {
		out := make([]accountJSON, 0, len(accounts))
		for _, a := range accounts {
			out = append(out, accountJSON{Code: a.Code, Name: a.Name, Type: string(a.Type), NormalBalance: a.NormalBalance})
		}
		return cli.JSON(env.Stdout, map[string]any{"accounts": out})
	}
	return writeAccounts(env.Stdout, accounts)
}

func accountsAddCmd(ctx context.Context, env cli.Env, args []string) error {
	var name, typ string
	cfg, s := loadConfigWith("gl accounts add CODE", env, func(s *flagSet) {
		s.jsonFlag()
		s.set.Flags().StringVar(&name, "name", "", "the account's name (required)")
		s.set.Flags().StringVar(&typ, "type", "", "asset, liability, equity, revenue or expense; the normal balance follows from it")
	})
	// The code may come before the flags (gl accounts add 4010 --name ...) or after them.
	var code string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		code, args = args[0], args[1:]
	}
	if err := s.parse(args, cfg); err != nil {
		return err
	}
	if rest := s.set.Args(); code == "" && len(rest) == 1 {
		code = rest[0]
	} else if len(rest) > 0 {
		return fmt.Errorf("accounts add: unexpected arguments %q", rest)
	}
	if code == "" {
		return fmt.Errorf("accounts add: the account code is missing (gl accounts add CODE --name N --type T)")
	}
	account, err := gl.NewAccount(code, name, gl.AccountType(typ))
	if err != nil {
		return err
	}
	ledger, closeLedger, err := openLedger(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeLedger()
	added, err := ledger.AddAccount(ctx, account)
	if err != nil {
		return err
	}
	if s.json {
		return cli.JSON(env.Stdout, accountJSON{Code: added.Code, Name: added.Name, Type: string(added.Type), NormalBalance: added.NormalBalance})
	}
	fmt.Fprintf(env.Stdout, "added account %s (%s, %s, normal balance %s)\n", added.Code, added.Name, added.Type, added.NormalBalance)
	return nil
}

func writeAccounts(w io.Writer, accounts []gl.Account) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tNAME\tTYPE\tNORMAL BALANCE")
	for _, a := range accounts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Code, a.Name, a.Type, a.NormalBalance)
	}
	return tw.Flush()
}

// openLedger opens the GL database (created and migrated when needed, like serve does).
func openLedger(ctx context.Context, cfg *Config, env cli.Env) (*postgres.Ledger, func(), error) {
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return nil, nil, err
	}
	pool, err := serve.OpenDatabase(ctx, cfg.DatabaseURL, "gl", log.Level(max(log.GetLevel(), warnLevel)))
	if err != nil {
		return nil, nil, err
	}
	return postgres.NewLedger(pool), pool.Close, nil
}
