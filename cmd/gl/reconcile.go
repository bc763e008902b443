package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/cli"
	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/wallet"
	walletpostgres "walletgl/internal/wallet/postgres"
)

// transferSource is the wallet's side of a reconciliation.
type transferSource interface {
	// All returns every transfer the wallet holds.
	All(ctx context.Context) ([]gl.SourceTransfer, error)
	// Get returns one transfer, or found=false.
	Get(ctx context.Context, id string) (t gl.SourceTransfer, found bool, err error)
	Name() string
}

// reconcileCmd compares the wallet's transfers with the GL's entries and reports each
// difference; it exits non-zero unless both sides agree.
func reconcileCmd(ctx context.Context, env cli.Env, args []string) error {
	var walletURL, walletDB string
	cfg, s := loadConfigWith("gl reconcile", env, func(s *flagSet) {
		s.jsonFlag()
		s.set.String(&walletURL, "WALLET_URL", "wallet-url", "http://127.0.0.1:8080", "the wallet's HTTP API, read by gl reconcile")
		s.set.String(&walletDB, "WALLET_DATABASE_URL", "wallet-database-url", "", "when set, gl reconcile reads the wallet's database (read-only) instead of its API")
	})
	if err := s.parse(args, cfg); err != nil {
		return err
	}
	var source transferSource = &httpSource{base: strings.TrimRight(walletURL, "/"), client: &http.Client{Timeout: 30 * time.Second}}
	if walletDB != "" {
		pool, err := openReadOnly(ctx, walletDB)
		if err != nil {
			return err
		}
		defer pool.Close()
		source = &dbSource{store: walletpostgres.NewStore(pool, walletpostgres.Options{}), db: pool.Config().ConnConfig.Database}
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()

	rec, err := reconcile(ctx, cfg.Rule, source, postgres.NewLedger(pool))
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if s.json {
		if err := cli.JSON(env.Stdout, rec); err != nil {
			return err
		}
	} else {
		writeReconcileReport(env.Stdout, source.Name(), pool.Config().ConnConfig.Database, rec)
	}
	if !rec.Agree() {
		return fmt.Errorf("reconcile: %d differences", len(rec.Differences))
	}
	return nil
}

// reconcile reads both sides and compares them. The wallet is read first; an entry whose
// transfer was not in that listing (committed while it was being read) is looked up on its own
// before it counts as extra.
func reconcile(ctx context.Context, rule gl.PostingRule, source transferSource, ledger *postgres.Ledger) (gl.Reconciliation, error) {
	transfers, err := source.All(ctx)
	if err != nil {
		return gl.Reconciliation{}, err
	}
	var entries []gl.Entry
	after := ""
	for {
		page, err := ledger.Entries(ctx, gl.EntryQuery{After: after, Limit: gl.MaxPageSize})
		if err != nil {
			return gl.Reconciliation{}, fmt.Errorf("read GL entries: %w", err)
		}
		entries = append(entries, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	known := make(map[string]bool, len(transfers))
	for _, t := range transfers {
		known[t.ID] = true
	}
	for _, e := range entries {
		if known[e.TransferID] {
			continue
		}
		t, found, err := source.Get(ctx, e.TransferID)
		if err != nil {
			return gl.Reconciliation{}, err
		}
		if found {
			transfers = append(transfers, t)
			known[t.ID] = true
		}
	}
	return gl.Reconcile(rule, transfers, entries), nil
}

func writeReconcileReport(w io.Writer, source, glDB string, r gl.Reconciliation) {
	fmt.Fprintf(w, "gl reconcile: wallet %s against GL database %s\n", source, glDB)
	fmt.Fprintf(w, "  wallet transfers  %d\n  GL entries        %d\n", r.Transfers, r.Entries)
	counts := map[string]int{}
	for _, d := range r.Differences {
		counts[d.Kind]++
		entries := ""
		if len(d.EntryIDs) > 0 {
			entries = " entries " + strings.Join(d.EntryIDs, ",")
		}
		fmt.Fprintf(w, "  %-9s transfer %s%s: %s\n", strings.ToUpper(d.Kind), d.TransferID, entries, d.Detail)
	}
	for _, kind := range []string{gl.DiffMissing, gl.DiffExtra, gl.DiffDuplicate, gl.DiffMismatch} {
		fmt.Fprintf(w, "  %-9s %d\n", kind, counts[kind])
	}
	if r.Agree() {
		fmt.Fprintf(w, "verdict: RECONCILED — %d transfers, %d entries, every transfer posted exactly once with its amount, currency and accounts\n", r.Transfers, r.Entries)
		return
	}
	fmt.Fprintf(w, "verdict: NOT RECONCILED — %d differences between the wallet and the GL\n", len(r.Differences))
}

// openReadOnly connects to the wallet's database in read-only transactions: reconciling never writes.
func openReadOnly(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse wallet database url: %w", err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open wallet database: %w", err)
	}
	return pool, nil
}

type dbSource struct {
	store *walletpostgres.Store
	db    string
}

func (s *dbSource) Name() string { return "database " + s.db }

func (s *dbSource) All(ctx context.Context) ([]gl.SourceTransfer, error) {
	var out []gl.SourceTransfer
	cursor := wallet.Cursor{}
	for {
		page, err := s.store.ListTransfers(ctx, cursor, wallet.MaxListLimit)
		if err != nil {
			return nil, fmt.Errorf("read wallet transfers: %w", err)
		}
		for _, t := range page.Transfers {
			out = append(out, gl.SourceTransfer{ID: t.ID.String(), Amount: t.Amount, Currency: t.Currency})
		}
		if len(page.Transfers) < wallet.MaxListLimit {
			return out, nil
		}
		cursor = page.Next
	}
}

func (s *dbSource) Get(ctx context.Context, id string) (gl.SourceTransfer, bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return gl.SourceTransfer{}, false, nil
	}
	t, err := s.store.GetTransfer(ctx, uid)
	if errors.Is(err, wallet.ErrTransferNotFound) {
		return gl.SourceTransfer{}, false, nil
	}
	if err != nil {
		return gl.SourceTransfer{}, false, fmt.Errorf("read wallet transfer %s: %w", id, err)
	}
	return gl.SourceTransfer{ID: t.ID.String(), Amount: t.Amount, Currency: t.Currency}, true, nil
}

type httpSource struct {
	base   string
	client *http.Client
}

func (s *httpSource) Name() string { return "API " + s.base }

type transferJSON struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

func (s *httpSource) All(ctx context.Context) ([]gl.SourceTransfer, error) {
	var out []gl.SourceTransfer
	cursor := ""
	for {
		var page struct {
			Transfers  []transferJSON `json:"transfers"`
			NextCursor string         `json:"next_cursor"`
		}
		path := fmt.Sprintf("/v1/transfers?limit=%d&after=%s", wallet.MaxListLimit, url.QueryEscape(cursor))
		if _, err := s.get(ctx, path, &page); err != nil {
			return nil, err
		}
		for _, t := range page.Transfers {
			out = append(out, gl.SourceTransfer(t))
		}
		if len(page.Transfers) < wallet.MaxListLimit {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

func (s *httpSource) Get(ctx context.Context, id string) (gl.SourceTransfer, bool, error) {
	var t transferJSON
	found, err := s.get(ctx, "/v1/transfers/"+url.PathEscape(id), &t)
	return gl.SourceTransfer(t), found, err
}

// get fetches path into v; a 404 is found=false.
func (s *httpSource) get(ctx context.Context, path string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return false, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("ask the wallet: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("ask the wallet: GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return false, fmt.Errorf("ask the wallet: decode %s: %w", path, err)
	}
	return true, nil
}
