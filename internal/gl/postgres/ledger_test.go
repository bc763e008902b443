package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/postgres/internal/gldb"
)

type testBundle struct {
	pool   *pgxpool.Pool
	ledger *postgres.Ledger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "gl")
	return &testBundle{pool: pool, ledger: postgres.NewLedger(pool)}
}

func (b *testBundle) post(t *testing.T, e gl.Entry) (bool, error) {
	t.Helper()
	var created bool
	err := database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		created, err = b.ledger.Post(context.Background(), tx, e)
		return err
	})
	return created, err
}

func entry(transferID, currency string, amount int64) gl.Entry {
	return gl.Entry{
		ID: uuid.Must(uuid.NewV7()), EventID: uuid.Must(uuid.NewV7()).String(), TransferID: transferID,
		Currency: currency, OccurredAt: time.Now().UTC(),
		Lines: []gl.Line{
			{AccountCode: "1010", Direction: gl.Debit, Amount: amount, WalletID: "w-from"},
			{AccountCode: "2010", Direction: gl.Credit, Amount: amount, WalletID: "w-to"},
		},
	}
}

func TestLedgerPost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("a new entry is created with its lines at the entry's posting time", func(t *testing.T) {
		t.Parallel()
		e := entry("t-new", "USD", 300)
		created, err := b.post(t, e)
		require.NoError(t, err)
		require.True(t, created)

		got, err := b.ledger.EntriesByTransfer(ctx, "t-new")
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, e.ID, got[0].ID)
		require.Equal(t, e.Lines, got[0].Lines)
		require.False(t, got[0].PostedAt.IsZero())
	})

	t.Run("a second entry for the transfer is not created", func(t *testing.T) {
		t.Parallel()
		created, err := b.post(t, entry("t-dup", "USD", 300))
		require.NoError(t, err)
		require.True(t, created)
		created, err = b.post(t, entry("t-dup", "USD", 300))
		require.NoError(t, err)
		require.False(t, created)
	})

	t.Run("an event posted for another transfer is refused", func(t *testing.T) {
		t.Parallel()
		first := entry("t-event-a", "USD", 300)
		again := entry("t-event-b", "USD", 300)
		again.EventID = first.EventID
		created, err := b.post(t, first)
		require.NoError(t, err)
		require.True(t, created)
		_, err = b.post(t, again)
		require.ErrorIs(t, err, gl.ErrEventTaken)
		got, err := b.ledger.EntriesByTransfer(ctx, "t-event-b")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("an unbalanced entry is refused before it reaches the database", func(t *testing.T) {
		t.Parallel()
		e := entry("t-unbalanced", "USD", 300)
		e.Lines[1].Amount = 299
		_, err := b.post(t, e)
		require.ErrorIs(t, err, gl.ErrUnbalanced)
	})

	t.Run("concurrent postings of one transfer create one entry", func(t *testing.T) {
		t.Parallel()
		const n = 4
		var wg sync.WaitGroup
		results := make(chan bool, n)
		for range n {
			wg.Go(func() {
				created, err := b.post(t, entry("t-race", "USD", 10))
				if err != nil {
					t.Errorf("post: %v", err)
				}
				results <- created
			})
		}
		wg.Wait()
		close(results)
		var created int
		for c := range results {
			if c {
				created++
			}
		}
		require.Equal(t, 1, created)
	})

	t.Run("a stored entry whose debits leave int64 is found and compared, not an error", func(t *testing.T) {
		t.Parallel()
		// The Poster refuses such an entry; plain SQL can write it, since it balances.
		_, err := b.pool.Exec(ctx, `BEGIN;
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			VALUES ('00000000-0000-7000-8000-0000000000b1', 'ev-huge', 't-huge', 'USD', now());
			INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
			SELECT '00000000-0000-7000-8000-0000000000b1', a.code, a.direction, 4611686018427387905, 'USD', 'w-1'
			FROM (VALUES ('1010', 'debit'), ('1010', 'debit'), ('2010', 'credit'), ('2010', 'credit')) AS a (code, direction);
			COMMIT;`)
		require.NoError(t, err)
		var postings []gl.Posting
		err = database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			postings, err = b.ledger.PostBatch(ctx, tx, []gl.Entry{entry("t-huge", "USD", 5)})
			return err
		})
		require.NoError(t, err)
		require.Len(t, postings, 1)
		require.False(t, postings[0].Created)
		require.Equal(t, "ev-huge", postings[0].Entry.EventID)
		require.Equal(t, "9223372036854775810", postings[0].Amount.String())
	})
}

func TestDatabaseRefusesUnbalancedEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Write through gldb directly, as a buggy writer that skipped Entry.Balanced would.
	write := func(lines gldb.InsertLinesParams) error {
		return database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			q := gldb.New(tx)
			row, err := q.InsertEntry(ctx, gldb.InsertEntryParams{
				ID: lines.EntryID, EventID: lines.EntryID.String(), TransferID: lines.EntryID.String(),
				Currency: "USD", OccurredAt: time.Now(),
			})
			if err != nil {
				return err
			}
			lines.Currency, lines.PostedAt = row.Currency, row.PostedAt
			if len(lines.Amounts) == 0 {
				return nil
			}
			return q.InsertLines(ctx, lines)
		})
	}
	tests := []struct {
		name  string
		lines gldb.InsertLinesParams
	}{
		{"debits differ from credits", gldb.InsertLinesParams{
			AccountCodes: []string{"1010", "2010"}, Directions: []string{"debit", "credit"}, Amounts: []int64{5, 4}}},
		{"an entry has no lines", gldb.InsertLinesParams{}},
		{"an entry has a single line", gldb.InsertLinesParams{
			AccountCodes: []string{"1010"}, Directions: []string{"debit"}, Amounts: []int64{5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.lines.EntryID = uuid.Must(uuid.NewV7())
			err := write(tt.lines)
			require.Error(t, err)
			require.Contains(t, err.Error(), "does not balance")
		})
	}

	t.Run("a line added later to a posted entry must balance on its own", func(t *testing.T) {
		t.Parallel()
		e := entry("t-later-line", "USD", 9)
		created, err := b.post(t, e)
		require.NoError(t, err)
		require.True(t, created)
		var id uuid.UUID
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT id FROM journal_entries WHERE transfer_id = 't-later-line'").Scan(&id))
		err = gldb.New(b.pool).InsertLines(ctx, gldb.InsertLinesParams{
			EntryID: id, AccountCodes: []string{"1010"}, Directions: []string{"debit"}, Amounts: []int64{1},
			Currency: "USD", PostedAt: time.Now(),
		})
		require.ErrorContains(t, err, "does not balance")
	})

	t.Run("an entry's lines split over two statements are refused at the first", func(t *testing.T) {
		t.Parallel()
		// The check runs per statement (db/schema/gl/00005): each INSERT must leave every entry
		// it wrote lines for balanced, as every writer of the GL does.
		id := uuid.Must(uuid.NewV7())
		err := database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			q := gldb.New(tx)
			row, err := q.InsertEntry(ctx, gldb.InsertEntryParams{
				ID: id, EventID: id.String(), TransferID: id.String(), Currency: "USD", OccurredAt: time.Now(),
			})
			if err != nil {
				return err
			}
			for _, dir := range []string{"debit", "credit"} {
				if err := q.InsertLines(ctx, gldb.InsertLinesParams{
					EntryID: id, AccountCodes: []string{"1010"}, Directions: []string{dir}, Amounts: []int64{3},
					Currency: row.Currency, PostedAt: row.PostedAt,
				}); err != nil {
					return err
				}
			}
			return nil
		})
		require.ErrorContains(t, err, "does not balance")
	})

	t.Run("entries cannot be rewritten", func(t *testing.T) {
		t.Parallel()
		created, err := b.post(t, entry("t-history", "USD", 7))
		require.NoError(t, err)
		require.True(t, created)
		_, err = b.pool.Exec(ctx, "UPDATE journal_lines SET amount = amount + 1")
		require.ErrorContains(t, err, "append-only")
		_, err = b.pool.Exec(ctx, "DELETE FROM journal_entries")
		require.ErrorContains(t, err, "append-only")
	})
}

func TestLedgerReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i, e := range []gl.Entry{entry("t1", "USD", 100), entry("t2", "USD", 50), entry("t3", "EUR", 7)} {
		created, err := b.post(t, e)
		require.NoError(t, err, "entry %d", i)
		require.True(t, created)
	}

	t.Run("an unposted transfer has no entries", func(t *testing.T) {
		t.Parallel()
		got, err := b.ledger.EntriesByTransfer(ctx, "t-unknown")
		require.NoError(t, err)
		require.NotNil(t, got)
		require.Empty(t, got)
	})

	t.Run("an account balance sums its lines in one currency", func(t *testing.T) {
		t.Parallel()
		got, err := b.ledger.AccountBalance(ctx, "1010", "USD", nil)
		require.NoError(t, err)
		require.Equal(t, gl.AccountBalance{AccountCode: "1010", Currency: "USD", NormalBalance: gl.Debit, Debits: gl.SumOf(150)}, got)
		require.Equal(t, gl.SumOf(150), got.Balance())
		got, err = b.ledger.AccountBalance(ctx, "2010", "JPY", nil)
		require.NoError(t, err)
		require.Equal(t, gl.AccountBalance{AccountCode: "2010", Currency: "JPY", NormalBalance: gl.Credit}, got)
	})

	t.Run("an unknown account is not found", func(t *testing.T) {
		t.Parallel()
		_, err := b.ledger.AccountBalance(ctx, "9999", "USD", nil)
		require.ErrorIs(t, err, gl.ErrAccountNotFound)
		_, err = b.ledger.Account(ctx, "9999")
		require.ErrorIs(t, err, gl.ErrAccountNotFound)
	})

	t.Run("the chart of accounts holds the transfer accounts", func(t *testing.T) {
		t.Parallel()
		got, err := b.ledger.Account(ctx, "2010")
		require.NoError(t, err)
		require.Equal(t, gl.Credit, got.NormalBalance)
		require.Equal(t, gl.Liability, got.Type)
	})

	t.Run("the trial balance lists accounts per currency and balances", func(t *testing.T) {
		t.Parallel()
		tb, err := b.ledger.TrialBalance(ctx)
		require.NoError(t, err)
		require.Equal(t, []gl.AccountBalance{
			{AccountCode: "1010", Currency: "EUR", NormalBalance: gl.Debit, Debits: gl.SumOf(7)},
			{AccountCode: "2010", Currency: "EUR", NormalBalance: gl.Credit, Credits: gl.SumOf(7)},
			{AccountCode: "1010", Currency: "USD", NormalBalance: gl.Debit, Debits: gl.SumOf(150)},
			{AccountCode: "2010", Currency: "USD", NormalBalance: gl.Credit, Credits: gl.SumOf(150)},
		}, tb.Accounts)
		// Each account's balance is positive on its normal side: cash received (an asset,
		// debit normal) and what is owed to the wallets (a liability, credit normal) alike.
		for _, a := range tb.Accounts {
			require.Equal(t, 1, a.Balance().Sign(), "%s %s", a.AccountCode, a.Currency)
		}
		require.Equal(t, []gl.CurrencyTotal{
			{Currency: "EUR", Debits: gl.SumOf(7), Credits: gl.SumOf(7), Balanced: true},
			{Currency: "USD", Debits: gl.SumOf(150), Credits: gl.SumOf(150), Balanced: true},
		}, tb.Currencies)
		require.True(t, tb.Balanced)
	})

	t.Run("ping answers", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, b.ledger.Ping(ctx))
	})
}

func TestLedgerOnAnUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Port 1 on loopback: nothing listens, the connection is refused at once.
	refused, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/gl?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(refused.Close)
	closed, _ := envtest.MigratedPool(t, "gl")
	closed.Close()
	for name, pool := range map[string]*pgxpool.Pool{"refused": refused, "closed": closed} {
		ledger := postgres.NewLedger(pool)
		_, err := ledger.Account(ctx, "1010")
		require.ErrorIs(t, err, gl.ErrUnavailable, name)
		require.NotErrorIs(t, err, gl.ErrAccountNotFound, name)
		_, err = ledger.TrialBalance(ctx)
		require.ErrorIs(t, err, gl.ErrUnavailable, name)
		require.True(t, database.IsTransient(err), "the driver's error stays in the chain: %v", err)
	}
}
