package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/walletapi"
	"walletgl/internal/money"
)

// Where the GL reads the wallet's transfers, for gl reconcile and the check that ends
// gl replay --from-start.
const (
	walletURLVar         = "WALLET_URL"
	reconcileWalletDBVar = "GL_RECONCILE_WALLET_DATABASE_URL"
	defaultWalletURL     = "http://127.0.0.1:8080"
)

// walletSource is the wallet's side of a reconciliation as the command line chose it: the
// wallet's API (the default), or the wallet database's published view.
type walletSource struct {
	apiURL string
	apiKey string // WALLET_API_KEY
	dbURL  string
}

func (w *walletSource) bind(s *config.Set) {
	s.String(&w.apiURL, walletURLVar, "wallet-url", defaultWalletURL,
		"the wallet's HTTP API, read by gl reconcile and by gl replay's check")
	s.Secret(&w.apiKey, "WALLET_API_KEY", "an API key of the wallet with transfers:read, sent to WALLET_URL")
	s.String(&w.dbURL, reconcileWalletDBVar, "reconcile-wallet-database-url", "",
		"when set, gl reconcile and gl replay's check read the wallet database's views reconcile_* "+
			"(read-only; a replica will do) instead of the wallet's API")
}

// open returns the source, its name for reports (which names the view read, once read), and
// what releases it. A WALLET_DATABASE_URL in
// the GL's environment is the wallet's own setting, which gl once read here: say that it is
// not read any more, rather than silently reading the API.
func (w *walletSource) open(ctx context.Context, env cli.Env) (gl.TransferSource, func() string, func(), error) {
	if w.dbURL == "" {
		if env.Getenv("WALLET_DATABASE_URL") != "" {
			fmt.Fprintf(env.Stderr, "gl: WALLET_DATABASE_URL is the wallet's own setting and gl does not read it; "+
				"reading the wallet's API at %s (%s reads the wallet's database instead)\n", w.apiURL, reconcileWalletDBVar)
		}
		client := walletapi.New(w.apiURL)
		client.APIKey = w.apiKey
		name := "API " + strings.TrimRight(w.apiURL, "/")
		return client, func() string { return name }, func() {}, nil
	}
	view, err := postgres.OpenWalletView(ctx, w.dbURL)
	if err != nil {
		return nil, nil, nil, err
	}
	name := func() string { return "database " + view.Database() + " (view " + view.TransfersView() + ")" }
	return view, name, view.Close, nil
}

// warnDenied says which of the wallet's views the role of the wallet's database may not read:
// the reader fell back to older ones, which do not tell what these add (a batch's legs keyed
// by their batch: without it they show as missing and their entry as extra).
func warnDenied(w io.Writer, source gl.TransferSource) {
	view, ok := source.(*postgres.WalletView)
	if !ok || len(view.Denied()) == 0 {
		return
	}
	fmt.Fprintf(w, "gl: warning: the role of %s may not read %s; read the older views instead, which do not tell what these add "+
		"(a batch's legs keyed by their batch); grant them as docs/database-roles.md shows\n",
		reconcileWalletDBVar, strings.Join(view.Denied(), ", "))
}

// reconcileCmd compares the wallet's transfers with the GL's entries and reports each
// difference; it exits non-zero unless both sides agree.
func reconcileCmd(ctx context.Context, env cli.Env, args []string) error {
	var wallet walletSource
	return service.Run(ctx, env, args, cli.ReadOnly, wallet.bind, func(c cli.Call[*Config]) error {
		source, sourceName, closeSource, err := wallet.open(ctx, env)
		if err != nil {
			return err
		}
		defer closeSource()
		ledger := postgres.NewLedger(c.Pool)
		rules, err := ledger.Rules(ctx)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		rec, err := gl.Reconciler{Rules: rules, Source: source, Ledger: ledger, SubLedgers: ledger}.Reconcile(ctx)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		warnDenied(env.Stderr, source)
		if c.JSON {
			if err := cli.JSON(env.Stdout, rec); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(env.Stdout, "gl reconcile: wallet %s against GL database %s\n", sourceName(), c.Pool.Config().ConnConfig.Database)
			writeReconciliation(env.Stdout, "  ", rec, true)
		}
		if !rec.Agree() {
			return fmt.Errorf("reconcile: %d differences", len(rec.Differences)+len(rec.Balances))
		}
		return nil
	})
}

// writeReconciliation prints the counts, each difference, and a verdict, every line after
// indent; withBalances adds how the wallets' balances were compared (gl reconcile; gl replay's
// check compares movements only).
func writeReconciliation(w io.Writer, indent string, r gl.Reconciliation, withBalances bool) {
	fmt.Fprintf(w, "%swallet transfers  %d\n%sGL entries        %d\n", indent, r.Transfers, indent, r.Entries)
	counts := map[string]int{}
	for _, d := range r.Differences {
		counts[d.Kind]++
		entries := ""
		if len(d.EntryIDs) > 0 {
			entries = " entries " + strings.Join(d.EntryIDs, ",")
		}
		if d.Kind == gl.DiffHolds {
			fmt.Fprintf(w, "%s%-9s %s\n", indent, strings.ToUpper(d.Kind), d.Detail)
			continue
		}
		if d.HoldID != "" {
			fmt.Fprintf(w, "%s%-9s hold %s (%s)%s: %s\n", indent, strings.ToUpper(d.Kind), d.HoldID, d.TransferID, entries, d.Detail)
			continue
		}
		fmt.Fprintf(w, "%s%-9s transfer %s%s: %s\n", indent, strings.ToUpper(d.Kind), d.TransferID, entries, d.Detail)
	}
	for _, kind := range []string{gl.DiffMissing, gl.DiffExtra, gl.DiffDuplicate, gl.DiffMismatch} {
		fmt.Fprintf(w, "%s%-9s %d\n", indent, kind, counts[kind])
	}
	if r.HoldsCompared {
		fmt.Fprintf(w, "%swallet holds      %d (each compared with its placement and release)\n", indent, r.WalletHolds)
	} else {
		fmt.Fprintf(w, "%swallet holds      not published by the wallet: the GL's hold totals only\n", indent)
	}
	writeHolds(w, indent, r.Holds)
	if withBalances {
		writeBalances(w, indent, r)
	}
	if r.Agree() {
		fmt.Fprintf(w, "verdict: RECONCILED — %d transfers, %d entries, every transfer posted exactly once with its amount, currency and accounts\n", r.Transfers, r.Entries)
		return
	}
	fmt.Fprintf(w, "verdict: NOT RECONCILED — %d differences between the wallet and the GL\n", len(r.Differences)+len(r.Balances))
}

// writeBalances prints how the wallets' balances were compared with their sub-ledgers and
// each wallet whose figure differs.
func writeBalances(w io.Writer, indent string, r gl.Reconciliation) {
	if !r.BalancesCompared {
		fmt.Fprintf(w, "%swallet balances   not compared: the wallet does not publish them in one snapshot (%s and %s in its database, %s)\n",
			indent, postgres.BalancesViewName, postgres.MovementsViewName, reconcileWalletDBVar)
		return
	}
	fmt.Fprintf(w, "%swallet balances   %d (each balance and held amount against its sub-ledger; %d movements in flight left out)\n",
		indent, r.WalletBalances, r.MovementsInFlight)
	for _, d := range r.Balances {
		fmt.Fprintf(w, "%s%-9s wallet %s %s %s: %s\n", indent, "BALANCE", d.WalletID, d.Currency, d.Figure, d.Detail)
	}
}

// writeHolds prints, per currency, the holds the GL posted, the open ones and their total
// against the hold account's balance (nothing when the GL has no hold).
func writeHolds(w io.Writer, indent string, holds []gl.HoldTotal) {
	for _, h := range holds {
		verdict := "equal"
		if !h.AccountBalance.Equal(h.OpenAmount) {
			verdict = "DIFFERENT"
		}
		fmt.Fprintf(w, "%sholds %s  %d placed, %d open totalling %s; account %s %s (%s)\n", indent, h.Currency,
			h.Placed, h.Open, money.FormatDigits(h.OpenAmount.String(), h.Currency), gl.DefaultHoldRules.HoldAccount(),
			money.FormatDigits(h.AccountBalance.String(), h.Currency), verdict)
	}
}
