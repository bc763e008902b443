package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/auth"
	"walletgl/internal/config"
	"walletgl/internal/database"
)

// The API key and audit commands of both binaries: <program> keys create | list | revoke and
// <program> audit list, on the service's own database. Scripts depend on their output:
// keys create --json prints {"id","name","scopes","owner","key"}, the key shown this once
// (owner null for a key of the platform). Keys are written as the database's owner (AsOwner):
// the runtime role only reads them and records their last use (db/roles/auth.sql).

// Keys is the group `<program> keys …`.
func (svc Service[S]) Keys() Command {
	return Command{Name: "keys", Sub: []Command{
		{Name: "create", Help: "a new API key, its secret printed once: --name NAME --scopes S1,S2 [--owner OWNER] [--json]", RunFunc: svc.keysCreate},
		{Name: "list", Help: "every API key with its scopes, last use and revocation [--json]", RunFunc: svc.keysList},
		{Name: "revoke", Help: "revoke an API key: ID [--json]", RunFunc: svc.keysRevoke},
	}}
}

// Audit is the group `<program> audit …`.
func (svc Service[S]) Audit() Command {
	return Command{Name: "audit", Sub: []Command{
		{Name: "list", Help: "the audit trail of administrative actions, oldest first: [--after ID] [--limit N] [--json]", RunFunc: svc.auditList},
	}}
}

// Operator is the actor of an operator's command in the audit trail: cli:<os user>.
func Operator() auth.Actor {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return auth.Actor{Name: "cli:" + name}
}

// AuditCommand records an operator's administrative action in db; a command whose action
// succeeded but could not be audited fails, so that nothing happens unrecorded unnoticed.
func AuditCommand(ctx context.Context, db database.Executor, action, target string, detail any) error {
	if err := auth.Audit(ctx, db, Operator(), action, target, detail); err != nil {
		return fmt.Errorf("%s done, but not recorded in the audit trail: %w", action, err)
	}
	return nil
}

// auditOperator records an operator's action in db, the transaction of the change itself
// (admin.AuditFunc): the change and its record commit together, so a failure undoes both.
func auditOperator(ctx context.Context, db database.Executor, action, target string, detail any) error {
	return auth.Audit(ctx, db, Operator(), action, target, detail)
}

func (svc Service[S]) keysCreate(ctx context.Context, env Env, args []string) error {
	var name, scopes, owner string
	own := func(s *config.Set) {
		s.Flags().StringVar(&owner, "owner", "", "whom the key acts for: 1 to 64 letters, digits, '.', '_' or '-'; it then reads and debits only its owner's wallets (default: the platform, every wallet; wallet keys only)")
		s.Flags().StringVar(&name, "name", "", "the key's name: 1 to 64 letters, digits, '.', '_' or '-' (required)")
		s.Flags().StringVar(&scopes, "scopes", "", "comma-separated scopes: "+scopeList(svc.Scopes)+" (required; admin implies every scope)")
	}
	return svc.Run(ctx, env, args, AsOwner, own, func(c Call[S]) error {
		if name == "" {
			return errors.New("keys create: --name is required")
		}
		parsed, err := auth.ParseScopes(scopes, svc.Scopes)
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		if owner != "" {
			if svc.Name != "wallet" { // the GL's ledger has no owners: its keys read all of it
				return fmt.Errorf("keys create: --owner is for the wallet's keys; a %s key acts on everything its scopes allow", svc.Name)
			}
			if err := auth.ValidateOwner(owner); err != nil {
				return fmt.Errorf("keys create: %w", err)
			}
		}
		key, secret, err := auth.NewKeys(c.Pool, svc.Scopes).CreateOwned(ctx, Operator(), name, owner, parsed)
		if err != nil {
			return err
		}
		if c.JSON {
			return JSON(env.Stdout, struct {
				ID     uuid.UUID    `json:"id"`
				Name   string       `json:"name"`
				Scopes []auth.Scope `json:"scopes"`
				Owner  *string      `json:"owner"`
				Key    string       `json:"key"`
			}{key.ID, key.Name, key.Scopes, key.Owner, secret})
		}
		fmt.Fprintf(env.Stdout, "key %s (%s), scopes %s\n%s\n", key.ID, key.Name, scopeList(key.Scopes), secret)
		fmt.Fprintln(env.Stderr, "the key is shown this once: store it now")
		return nil
	})
}

func (svc Service[S]) keysList(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadOnly, nil, func(c Call[S]) error {
		keys, err := auth.NewKeys(c.Pool, svc.Scopes).List(ctx)
		if err != nil {
			return err
		}
		if c.JSON {
			return JSON(env.Stdout, keys)
		}
		rows := make([][]string, len(keys))
		for i, k := range keys {
			rows[i] = []string{k.ID.String(), k.Name, scopeList(k.Scopes), k.CreatedAt.UTC().Format(time.RFC3339), when(k.LastUsedAt), when(k.RevokedAt)}
		}
		return Table(env.Stdout, []string{"ID", "NAME", "SCOPES", "CREATED", "LAST USED", "REVOKED"}, rows)
	})
}

func (svc Service[S]) keysRevoke(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, AsOwner, nil, func(c Call[S]) error {
		if len(c.Args) != 1 {
			return errors.New("keys revoke: give one key id")
		}
		id, err := uuid.Parse(c.Args[0])
		if err != nil {
			return fmt.Errorf("keys revoke: %q is not a key id", c.Args[0])
		}
		key, err := auth.NewKeys(c.Pool, svc.Scopes).Revoke(ctx, Operator(), id)
		if err != nil {
			return err
		}
		if c.JSON {
			return JSON(env.Stdout, key)
		}
		fmt.Fprintf(env.Stdout, "key %s (%s) revoked at %s\n", key.ID, key.Name, key.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	})
}

func (svc Service[S]) auditList(ctx context.Context, env Env, args []string) error {
	var after int64
	var limit int
	own := func(s *config.Set) {
		s.Flags().Int64Var(&after, "after", 0, "list entries after this id (the last one of a previous page)")
		s.Flags().IntVar(&limit, "limit", 100, "entries to list (at most 1000)")
	}
	return svc.Run(ctx, env, args, ReadOnly, own, func(c Call[S]) error {
		if err := checkLimit(limit); err != nil {
			return fmt.Errorf("audit list: %w", err)
		}
		entries, err := auth.NewKeys(c.Pool, svc.Scopes).AuditLog(ctx, after, limit)
		if err != nil {
			return err
		}
		if c.JSON {
			return JSON(env.Stdout, entries)
		}
		rows := make([][]string, len(entries))
		for i, e := range entries {
			rows[i] = []string{fmt.Sprint(e.ID), e.At.UTC().Format(time.RFC3339), e.Actor, e.Action, e.Target, Clip(string(e.Detail), 60)}
		}
		return Table(env.Stdout, []string{"ID", "AT", "ACTOR", "ACTION", "TARGET", "DETAIL"}, rows)
	})
}

func scopeList(scopes []auth.Scope) string {
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
