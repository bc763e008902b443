// Package postgres is the general ledger stored in PostgreSQL: it posts entries with the sqlc
// queries in gldb and reads the reports back, converting rows to gl types at this edge.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/gldb"
)

// Ledger is the built-in GL: the default gl.Poster, and the gl.Reader of the HTTP API.
type Ledger struct {
	pool    *pgxpool.Pool
	queries *gldb.Queries
}

var (
	_ gl.Poster        = (*Ledger)(nil)
	_ gl.PostingFinder = (*Ledger)(nil)
	_ gl.Reader        = (*Ledger)(nil)
	_ gl.Accounts      = (*Ledger)(nil)
)

// NewLedger returns the ledger in the database behind pool (migrated with the "gl" set).
func NewLedger(pool *pgxpool.Pool) *Ledger {
	return &Ledger{pool: pool, queries: gldb.New(pool)}
}

// Post inserts e and its lines in tx. A second entry for the same event or transfer is not
// inserted and reported as created == false. The lines take the entry's posted_at, which the
// database sets (clock_timestamp), so an entry and its lines carry one time.
func (l *Ledger) Post(ctx context.Context, tx pgx.Tx, e gl.Entry) (bool, error) {
	if !e.Balanced() {
		return false, fmt.Errorf("post entry %s: %w", e.ID, gl.ErrUnbalanced)
	}
	q := l.queries.WithTx(tx)
	row, err := q.InsertEntry(ctx, gldb.InsertEntryParams{
		ID: e.ID, EventID: e.EventID, TransferID: e.TransferID, Currency: e.Currency,
		Description: e.Description, OccurredAt: e.OccurredAt,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // ON CONFLICT DO NOTHING: event or transfer already posted
	}
	if err != nil {
		return false, dbError(err, "insert entry %s", e.ID)
	}
	params := gldb.InsertLinesParams{EntryID: row.ID, Currency: row.Currency, PostedAt: row.PostedAt}
	for _, line := range e.Lines {
		params.AccountCodes = append(params.AccountCodes, line.AccountCode)
		params.Directions = append(params.Directions, string(line.Direction))
		params.Amounts = append(params.Amounts, line.Amount)
	}
	if err := q.InsertLines(ctx, params); err != nil {
		return false, dbError(err, "insert lines of entry %s", e.ID)
	}
	return true, nil
}

// PostedEntry returns the entry (without lines) that holds the transfer's posting, as tx sees it.
func (l *Ledger) PostedEntry(ctx context.Context, tx pgx.Tx, transferID string) (gl.Entry, error) {
	row, err := l.queries.WithTx(tx).GetEntryByTransfer(ctx, transferID)
	if errors.Is(err, pgx.ErrNoRows) {
		return gl.Entry{}, fmt.Errorf("get entry of transfer %s: %w", transferID, gl.ErrEntryNotFound)
	}
	if err != nil {
		return gl.Entry{}, dbError(err, "get entry of transfer %s", transferID)
	}
	return entryFromRow(row), nil
}

// EntriesByTransfer returns the transfer's entries with their lines (at most one, by the
// unique constraint; an empty list when the transfer is not posted yet).
func (l *Ledger) EntriesByTransfer(ctx context.Context, transferID string) ([]gl.Entry, error) {
	rows, err := l.queries.ListEntriesByTransfer(ctx, transferID)
	if err != nil {
		return nil, dbError(err, "list entries of transfer %s", transferID)
	}
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
	lines, err := l.queries.ListLinesByEntries(ctx, ids)
	if err != nil {
		return nil, dbError(err, "list lines of transfer %s", transferID)
	}
	for _, line := range lines {
		i := byID[line.EntryID]
		entries[i].Lines = append(entries[i].Lines, gl.Line{
			AccountCode: line.AccountCode, Direction: gl.Direction(line.Direction), Amount: line.Amount,
		})
	}
	return entries, nil
}

// AccountBalance sums the account's lines in currency; zeros when it has none.
func (l *Ledger) AccountBalance(ctx context.Context, code, currency string) (gl.AccountBalance, error) {
	row, err := l.queries.AccountBalance(ctx, gldb.AccountBalanceParams{AccountCode: code, Currency: currency})
	if errors.Is(err, pgx.ErrNoRows) {
		return gl.AccountBalance{}, fmt.Errorf("balance of account %q: %w", code, gl.ErrAccountNotFound)
	}
	if err != nil {
		return gl.AccountBalance{}, dbError(err, "balance of account %q", code)
	}
	return gl.AccountBalance{AccountCode: row.AccountCode, Currency: currency, Debits: row.Debits, Credits: row.Credits}, nil
}

// TrialBalance sums every account's lines per currency, with the totals per currency.
func (l *Ledger) TrialBalance(ctx context.Context) (gl.TrialBalance, error) {
	rows, err := l.queries.TrialBalance(ctx)
	if err != nil {
		return gl.TrialBalance{}, dbError(err, "trial balance")
	}
	accounts := make([]gl.AccountBalance, 0, len(rows))
	for _, row := range rows {
		accounts = append(accounts, gl.AccountBalance{
			AccountCode: row.AccountCode, Currency: row.Currency, Debits: row.Debits, Credits: row.Credits,
		})
	}
	return gl.NewTrialBalance(accounts), nil
}

// Account returns the account with this code from the chart of accounts.
func (l *Ledger) Account(ctx context.Context, code string) (gl.Account, error) {
	row, err := l.queries.GetAccount(ctx, code)
	if errors.Is(err, pgx.ErrNoRows) {
		return gl.Account{}, fmt.Errorf("get account %q: %w", code, gl.ErrAccountNotFound)
	}
	if err != nil {
		return gl.Account{}, dbError(err, "get account %q", code)
	}
	return gl.Account{Code: row.Code, Name: row.Name, Type: row.Type, NormalBalance: gl.Direction(row.NormalBalance)}, nil
}

// Ping reports whether the database answers; cmd/gl can pass it as the health check.
func (l *Ledger) Ping(ctx context.Context) error {
	if err := l.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping gl database: %w", err)
	}
	return nil
}

// dbError wraps a database error; one that means the database cannot be reached also matches
// gl.ErrUnavailable, so callers can tell "retry later" from a failure.
func dbError(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if database.IsUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, gl.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func entryFromRow(row gldb.JournalEntry) gl.Entry {
	return gl.Entry{
		ID: row.ID, EventID: row.EventID, TransferID: row.TransferID, Currency: row.Currency,
		Description: row.Description, OccurredAt: row.OccurredAt, PostedAt: row.PostedAt,
	}
}
