// Package postgres is the general ledger stored in PostgreSQL: it posts entries with the sqlc
// queries in gldb and reads the reports back, converting rows to gl types at this edge.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
	"walletgl/internal/metadata"
	"walletgl/internal/problem"
)

// Ledger is the built-in GL: where the posting handler (internal/gl/posting) stores entries and
// reads rules, and the gl.Reader of the HTTP API.
type Ledger struct {
	pool    *pgxpool.Pool
	queries *gldb.Queries
	audit   AuditFunc
}

// AuditFunc records a change of the chart of accounts or of the posting rules in the audit
// trail, in db: the transaction that makes the change, so that both commit or neither does
// (cli.AuditCommand, with the operator as the actor).
type AuditFunc func(ctx context.Context, db database.Executor, action, target string, detail any) error

// WithAudit returns the ledger with its changes (AddAccount, SetRule, WithdrawRule) recorded
// by audit. A ledger without it records none: gl replay copying the live GL's chart and rules
// into a rebuild changes nothing the live GL's trail does not hold already.
func (l *Ledger) WithAudit(audit AuditFunc) *Ledger {
	c := *l
	c.audit = audit
	return &c
}

// record audits a change in tx when the ledger has an AuditFunc.
func (l *Ledger) record(ctx context.Context, tx pgx.Tx, action, target string, detail any) error {
	if l.audit == nil {
		return nil
	}
	return l.audit(ctx, tx, action, target, detail)
}

var (
	_ gl.Reader   = (*Ledger)(nil)
	_ gl.Accounts = (*Ledger)(nil)
	_ gl.Verifier = (*Ledger)(nil)
)

// NewLedger returns the ledger in the database behind pool (migrated with the "gl" set).
func NewLedger(pool *pgxpool.Pool) *Ledger {
	return &Ledger{pool: pool, queries: gldb.New(pool)}
}

// Post posts one entry in tx, a batch of one (PostBatch), and reports whether it was created:
// a second entry for the same transfer is not inserted.
func (l *Ledger) Post(ctx context.Context, tx pgx.Tx, e gl.Entry) (bool, error) {
	postings, err := l.PostBatch(ctx, tx, []gl.Entry{e})
	if err != nil {
		return false, err
	}
	return postings[0].Created, nil
}

// EntriesByTransfer returns the transfer's entries with their lines (at most one, by the
// unique constraint; an empty list when the transfer is not posted yet).
func (l *Ledger) EntriesByTransfer(ctx context.Context, transferID string) ([]gl.Entry, error) {
	rows, err := l.queries.ListEntriesByTransfer(ctx, transferID)
	if err != nil {
		return nil, fmt.Errorf("list entries of transfer %s: %w", transferID, interpretError(err))
	}
	return l.withLines(ctx, rows)
}

// EntriesByEvent returns the entries the event caused, with their lines (at most one).
func (l *Ledger) EntriesByEvent(ctx context.Context, eventID string) ([]gl.Entry, error) {
	rows, err := l.queries.ListEntriesByEvent(ctx, eventID)
	if err != nil {
		return nil, fmt.Errorf("list entries of event %s: %w", eventID, interpretError(err))
	}
	return l.withLines(ctx, rows)
}

// Entries returns a page of entries posted in [q.From, q.To), with their lines. The cursor is
// the last entry's id; one that is not an id the ledger holds is an invalid cursor.
func (l *Ledger) Entries(ctx context.Context, q gl.EntryQuery) (gl.EntryPage, error) {
	limit := pageSize(q.Limit)
	params := gldb.ListEntriesPostedParams{RowLimit: int32(limit + 1), PostedFrom: q.From, PostedBefore: q.To}
	if q.After != "" {
		id, err := uuid.Parse(q.After)
		if err != nil {
			return gl.EntryPage{}, problem.Newf(gl.ErrInvalidCursor, "cursor %q is not one the GL handed out", q.After)
		}
		params.AfterID = uuid.NullUUID{UUID: id, Valid: true}
	}
	var rows []gldb.JournalEntry
	var err error
	if len(q.Metadata) > 0 {
		rows, err = l.queries.ListEntriesByMetadata(ctx, gldb.ListEntriesByMetadataParams{
			Metadata: q.Metadata.JSON(), AfterID: params.AfterID, PostedFrom: params.PostedFrom,
			PostedBefore: params.PostedBefore, RowLimit: params.RowLimit,
		})
	} else {
		rows, err = l.queries.ListEntriesPosted(ctx, params)
	}
	if err != nil {
		return gl.EntryPage{}, fmt.Errorf("list entries: %w", interpretError(err))
	}
	if len(rows) == 0 && params.AfterID.Valid {
		// An empty page after a cursor: the end of the listing, or a cursor naming nothing.
		exists, err := l.queries.EntryExists(ctx, params.AfterID.UUID)
		if err != nil {
			return gl.EntryPage{}, fmt.Errorf("look up cursor entry %s: %w", params.AfterID.UUID, interpretError(err))
		}
		if !exists {
			return gl.EntryPage{}, problem.Newf(gl.ErrInvalidCursor, "cursor %q names no entry of the ledger", q.After)
		}
	}
	var page gl.EntryPage
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = rows[limit-1].ID.String()
	}
	page.Entries, err = l.withLines(ctx, rows)
	return page, err
}

// withLines converts rows to entries and loads their lines in one query, and the entries that
// reverse them in another.
func (l *Ledger) withLines(ctx context.Context, rows []gldb.JournalEntry) ([]gl.Entry, error) {
	return withLines(ctx, l.queries, rows)
}

func withLines(ctx context.Context, q *gldb.Queries, rows []gldb.JournalEntry) ([]gl.Entry, error) {
	entries := make([]gl.Entry, 0, len(rows))
	if len(rows) == 0 {
		return entries, nil
	}
	ids := make([]uuid.UUID, 0, len(rows))
	byID := make(map[uuid.UUID]int, len(rows))
	for i, row := range rows {
		entries = append(entries, entryFromRow(row))
		ids = append(ids, row.ID)
		byID[row.ID] = i
	}
	lines, err := q.ListLinesByEntries(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list lines of %d entries: %w", len(ids), interpretError(err))
	}
	for _, line := range lines {
		i := byID[line.EntryID]
		entries[i].Lines = append(entries[i].Lines, lineFromRow(entries[i], line))
	}
	reversing, err := q.ListReversingEntries(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list reversals of %d entries: %w", len(ids), interpretError(err))
	}
	for _, r := range reversing {
		i := byID[r.ReversesEntryID]
		entries[i].ReversedBy = append(entries[i].ReversedBy, r.ID)
	}
	var adjusted []uuid.UUID
	for _, e := range entries {
		if e.IsAdjustment() {
			adjusted = append(adjusted, e.ID)
		}
	}
	if len(adjusted) == 0 {
		return entries, nil
	}
	adjustments, err := q.ListAdjustmentsByEntries(ctx, adjusted)
	if err != nil {
		return nil, fmt.Errorf("list adjustments of %d entries: %w", len(adjusted), interpretError(err))
	}
	for _, a := range adjustments {
		i := byID[a.EntryID]
		entries[i].AdjustmentID, entries[i].Reason = a.ID, a.Reason
	}
	return entries, nil
}

// lineFromRow is a line of e as gl.Line reads it: its currency only where it is not the
// entry's, and its id and reversal only on a batch's lines (gl.IsBatch).
func lineFromRow(e gl.Entry, row gldb.ListLinesByEntriesRow) gl.Line {
	line := gl.Line{
		AccountCode: row.AccountCode, Direction: gl.Direction(row.Direction), Amount: row.Amount, WalletID: deref(row.WalletID),
		TransferID: deref(row.TransferID), LegKind: deref(row.LegKind),
	}
	if row.Currency != e.Currency {
		line.Currency = row.Currency
	}
	if e.IsBatch() {
		line.ID, line.Reversed = row.ID, row.Reversed
		if row.ReversesLineID != nil {
			line.ReversesLineID = *row.ReversesLineID
		}
	}
	return line
}

// AccountBalance sums the account's lines in currency posted up to asOf (nil: all of them);
// zeros when it has none, also as of any time before its first line.
func (l *Ledger) AccountBalance(ctx context.Context, code, currency string, asOf *time.Time) (gl.AccountBalance, error) {
	params := gldb.AccountBalanceParams{AccountCode: code, Currency: currency}
	if asOf != nil {
		t := *asOf // the answer's own copy
		params.AsOf = &t
	}
	row, err := l.queries.AccountBalance(ctx, params)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q: %w", code, gl.ErrAccountNotFound)
	case err != nil:
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q: %w", code, err)
	}
	b := gl.AccountBalance{
		AccountCode: row.AccountCode, Currency: currency, NormalBalance: gl.Direction(row.NormalBalance), AsOf: params.AsOf,
	}
	if b.Debits, b.Credits, err = debitsCredits(row.Debits, row.Credits); err != nil {
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q: %w", code, err)
	}
	return b, nil
}

// Statement returns a page of the account's lines in q.Currency with running balances in the
// account's normal-balance sign, posted in [q.From, q.To). The cursor is the last line's id;
// one that names no line of the account and currency is an invalid cursor.
func (l *Ledger) Statement(ctx context.Context, q gl.StatementQuery) (gl.Statement, error) {
	account, err := l.Account(ctx, q.AccountCode)
	if err != nil {
		return gl.Statement{}, err
	}
	limit := pageSize(q.Limit)
	params := gldb.AccountStatementParams{
		AccountCode: account.Code, Currency: q.Currency, NormalBalance: string(account.NormalBalance),
		RowLimit: int32(limit + 1), PostedFrom: q.From, PostedBefore: q.To,
	}
	if q.After != "" {
		id, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil || id <= 0 {
			return gl.Statement{}, problem.Newf(gl.ErrInvalidCursor, "cursor %q is not one the GL handed out", q.After)
		}
		params.AfterID = &id
	}
	rows, err := l.statementRows(ctx, params, q.WalletID)
	if err != nil {
		return gl.Statement{}, fmt.Errorf("statement of account %q: %w", q.AccountCode, interpretError(err))
	}
	if len(rows) == 0 && params.AfterID != nil {
		// An empty page after a cursor: the end of the statement, or a cursor naming nothing.
		exists, err := l.queries.StatementLineExists(ctx, gldb.StatementLineExistsParams{
			ID: *params.AfterID, AccountCode: account.Code, Currency: q.Currency, WalletID: q.WalletID,
		})
		if err != nil {
			return gl.Statement{}, fmt.Errorf("look up cursor line %d: %w", *params.AfterID, interpretError(err))
		}
		if !exists {
			return gl.Statement{}, problem.Newf(gl.ErrInvalidCursor, "cursor %q names no line of account %s in %s", q.After, account.Code, q.Currency)
		}
	}
	st := gl.Statement{Account: account, Currency: q.Currency, Lines: make([]gl.StatementLine, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		st.NextCursor = strconv.FormatInt(rows[limit-1].LineID, 10)
	}
	for _, r := range rows {
		running, err := sumFrom(r.RunningBalance)
		if err != nil {
			return gl.Statement{}, fmt.Errorf("statement of account %q, line %d: %w", q.AccountCode, r.LineID, err)
		}
		st.Lines = append(st.Lines, gl.StatementLine{
			LineID: r.LineID, EntryID: r.EntryID, EventID: r.EventID, TransferID: r.TransferID, Adjustment: r.Kind == gl.KindAdjustment,
			Direction: gl.Direction(r.Direction), Amount: r.Amount, PostedAt: r.PostedAt, RunningBalance: running,
		})
	}
	return st, nil
}

// statementRows reads a statement's page: of the whole account, or of walletID's sub-account
// (its lines of the account; no balance checkpoint, which is per account).
func (l *Ledger) statementRows(ctx context.Context, p gldb.AccountStatementParams, walletID string) ([]gldb.AccountStatementRow, error) {
	if walletID == "" {
		return l.queries.AccountStatement(ctx, p)
	}
	rows, err := l.queries.WalletAccountStatement(ctx, gldb.WalletAccountStatementParams{
		NormalBalance: p.NormalBalance, AfterID: p.AfterID, WalletID: walletID, AccountCode: p.AccountCode,
		Currency: p.Currency, RowLimit: p.RowLimit, PostedFrom: p.PostedFrom, PostedBefore: p.PostedBefore,
	})
	out := make([]gldb.AccountStatementRow, len(rows))
	for i, r := range rows {
		out[i] = gldb.AccountStatementRow(r)
	}
	return out, err
}

// WalletBalance sums walletID's lines of the account in currency posted up to asOf (nil: all
// of them): the wallet's sub-account; zeros when it has none.
func (l *Ledger) WalletBalance(ctx context.Context, code, currency, walletID string, asOf *time.Time) (gl.AccountBalance, error) {
	params := gldb.WalletAccountBalanceParams{AccountCode: code, Currency: currency, WalletID: walletID}
	if asOf != nil {
		t := *asOf
		params.AsOf = &t
	}
	row, err := l.queries.WalletAccountBalance(ctx, params)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q: %w", code, gl.ErrAccountNotFound)
	case err != nil:
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q, wallet %q: %w", code, walletID, err)
	}
	b := gl.AccountBalance{
		AccountCode: row.AccountCode, Currency: currency, WalletID: walletID, NormalBalance: gl.Direction(row.NormalBalance), AsOf: params.AsOf,
	}
	if b.Debits, b.Credits, err = debitsCredits(row.Debits, row.Credits); err != nil {
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q, wallet %q: %w", code, walletID, err)
	}
	return b, nil
}

func pageSize(n int) int {
	switch {
	case n <= 0:
		return gl.DefaultPageSize
	case n > gl.MaxPageSize:
		return gl.MaxPageSize
	}
	return n
}

// TrialBalance sums every account's lines per currency, with the totals per currency.
func (l *Ledger) TrialBalance(ctx context.Context) (gl.TrialBalance, error) {
	return l.TrialBalanceAsOf(ctx, nil)
}

// TrialBalanceAsOf sums every account's lines posted at or before asOf (nil: all of them) per
// currency, with the totals per currency.
func (l *Ledger) TrialBalanceAsOf(ctx context.Context, asOf *time.Time) (gl.TrialBalance, error) {
	if asOf != nil {
		t := *asOf // the answer's own copy
		asOf = &t
	}
	rows, err := l.queries.TrialBalance(ctx, asOf)
	if err != nil {
		return gl.TrialBalance{}, fmt.Errorf("trial balance: %w", interpretError(err))
	}
	accounts := make([]gl.AccountBalance, 0, len(rows))
	for _, row := range rows {
		debits, credits, err := debitsCredits(row.Debits, row.Credits)
		if err != nil {
			return gl.TrialBalance{}, fmt.Errorf("trial balance of account %q in %s: %w", row.AccountCode, row.Currency, err)
		}
		accounts = append(accounts, gl.AccountBalance{
			AccountCode: row.AccountCode, Currency: row.Currency, NormalBalance: gl.Direction(row.NormalBalance),
			Debits: debits, Credits: credits,
		})
	}
	tb := gl.NewTrialBalance(accounts)
	tb.AsOf = asOf
	return tb, nil
}

// Account returns the account with this code from the chart of accounts.
func (l *Ledger) Account(ctx context.Context, code string) (gl.Account, error) {
	row, err := l.queries.GetAccount(ctx, code)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return gl.Account{}, fmt.Errorf("get account %q: %w", code, gl.ErrAccountNotFound)
	case err != nil:
		return gl.Account{}, fmt.Errorf("get account %q: %w", code, err)
	}
	return accountFromRow(row), nil
}

// Accounts lists the chart of accounts by code.
func (l *Ledger) Accounts(ctx context.Context) ([]gl.Account, error) {
	rows, err := l.queries.ListAccounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", interpretError(err))
	}
	accounts := make([]gl.Account, 0, len(rows))
	for _, row := range rows {
		accounts = append(accounts, accountFromRow(row))
	}
	return accounts, nil
}

// AddAccount adds a to the chart of accounts, audited (WithAudit) in the same transaction;
// ErrAccountExists when its code is taken.
func (l *Ledger) AddAccount(ctx context.Context, a gl.Account) (gl.Account, error) {
	return database.WithTxV(ctx, l.pool, func(tx pgx.Tx) (gl.Account, error) {
		row, err := l.queries.WithTx(tx).InsertAccount(ctx, gldb.InsertAccountParams{
			Code: a.Code, Name: a.Name, Type: string(a.Type), NormalBalance: string(a.NormalBalance),
		})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow): // ON CONFLICT DO NOTHING: the code is taken
			return gl.Account{}, problem.Newf(gl.ErrAccountExists, "account %s is already in the chart of accounts", a.Code)
		case err != nil:
			return gl.Account{}, fmt.Errorf("add account %q: %w", a.Code, err)
		}
		added := accountFromRow(row)
		detail := map[string]string{"name": added.Name, "type": string(added.Type), "normal_balance": string(added.NormalBalance)}
		if err := l.record(ctx, tx, "account.add", added.Code, detail); err != nil {
			return gl.Account{}, err
		}
		return added, nil
	})
}

func accountFromRow(row gldb.Account) gl.Account {
	return gl.Account{
		Code: row.Code, Name: row.Name, Type: gl.AccountType(row.Type), NormalBalance: gl.Direction(row.NormalBalance),
		WalletControl: row.WalletControl,
	}
}

// Ping reports whether the database answers; cmd/gl can pass it as the health check.
func (l *Ledger) Ping(ctx context.Context) error {
	if err := l.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping gl database: %w", err)
	}
	return nil
}

func entryFromRow(row gldb.JournalEntry) gl.Entry {
	return gl.Entry{
		ID: row.ID, EventID: row.EventID, TransferID: row.TransferID, Currency: row.Currency,
		Description: row.Description, OccurredAt: row.OccurredAt, PostedAt: row.PostedAt,
		ReversesEntryID: row.ReversesEntryID.UUID, HoldID: deref(row.HoldID), EventType: row.EventType, Kind: row.Kind,
		Metadata: mustMetadata(row.Metadata),
	}
}

// mustMetadata reads a journal_entries.metadata column, a JSON object of strings by its check
// (db/schema/gl/00016): one that does not parse is a bug.
func mustMetadata(b []byte) metadata.Metadata {
	m, err := metadata.Parse(b)
	if err != nil {
		panic(fmt.Sprintf("journal_entries.metadata: %v", err))
	}
	return m
}

// deref is *s, or "" for nil (a NULL text column).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
