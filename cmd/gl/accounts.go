package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

type accountJSON struct {
	Code          string       `json:"code"`
	Name          string       `json:"name"`
	Type          string       `json:"type"`
	NormalBalance gl.Direction `json:"normal_balance"`
}

func accountsListCmd(ctx context.Context, env cli.Env, args []string) error {
	return service.Run(ctx, env, args, cli.ReadOnly, nil, func(c cli.Call[*Config]) error {
		accounts, err := postgres.NewLedger(c.Pool).Accounts(ctx)
		if err != nil {
			return err
		}
		if !c.JSON {
			return writeAccounts(env.Stdout, accounts)
		}
		out := make([]accountJSON, 0, len(accounts))
		for _, a := range accounts {
			out = append(out, accountJSON{Code: a.Code, Name: a.Name, Type: string(a.Type), NormalBalance: a.NormalBalance})
		}
		return cli.JSON(env.Stdout, map[string]any{"accounts": out})
	})
}

func accountsAddCmd(ctx context.Context, env cli.Env, args []string) error {
	var asJSON bool
	var name, typ string
	cfg, rest, err := service.Parse(env, args, func(s *config.Set) {
		cli.JSONFlag(s, &asJSON)
		s.Flags().StringVar(&name, "name", "", "the account's name (required)")
		s.Flags().StringVar(&typ, "type", "", "asset, liability, equity, revenue or expense; the normal balance follows from it")
	})
	if err != nil {
		return err
	}
	// The code may come before the flags (gl accounts add 4010 --name ...) or after them.
	switch {
	case len(rest) == 0:
		return fmt.Errorf("accounts add: the account code is missing (gl accounts add CODE --name N --type T)")
	case len(rest) > 1:
		return fmt.Errorf("accounts add: unexpected arguments %q", rest[1:])
	}
	account, err := gl.NewAccount(rest[0], name, gl.AccountType(typ))
	if err != nil {
		return err
	}
	pool, err := cli.OpenDatabase(ctx, cfg.DatabaseURL, cli.ReadWrite)
	if err != nil {
		return err
	}
	defer pool.Close()
	added, err := postgres.NewLedger(pool).WithAudit(cli.AuditCommand).AddAccount(ctx, account)
	if err != nil {
		return err
	}
	if asJSON {
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
