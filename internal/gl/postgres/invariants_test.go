package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestDatabaseInvariantsHoldAgainstPlainSQL plays a client that bypasses the ledger's code and
// writes SQL of its own: each statement breaks one invariant and the database must refuse it.
// The statements run in one transaction each, committed, so deferred checks run too.
func TestDatabaseInvariantsHoldAgainstPlainSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A balanced entry to collide with and to try to rewrite.
	_, err := b.pool.Exec(ctx, `
		BEGIN;
		INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
		VALUES ('00000000-0000-7000-8000-000000000001', 'ev-1', 'tr-1', 'USD', now());
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
		    ('00000000-0000-7000-8000-000000000001', '1010', 'debit', 100, 'USD', 'w-1'),
		    ('00000000-0000-7000-8000-000000000001', '2010', 'credit', 100, 'USD', 'w-1');
		COMMIT;`)
	require.NoError(t, err, "a balanced entry written by plain SQL commits")
	// An adjustment, with its row and the API key that made it, to try to rewrite.
	_, err = b.pool.Exec(ctx, `
		BEGIN;
		INSERT INTO api_keys (id, name, secret_hash, scopes)
		VALUES ('00000000-0000-7000-8000-0000000000f1', 'accountant', decode(repeat('ab', 32), 'hex'), '{ledger:write}');
		INSERT INTO adjustments (id, entry_id, idempotency_key, request_hash, reason, created_by_key)
		VALUES ('00000000-0000-7000-8000-0000000000a1', '00000000-0000-7000-8000-0000000000e1', 'fix-1',
		        decode(repeat('cd', 32), 'hex'), 'fee refund', '00000000-0000-7000-8000-0000000000f1');
		INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, event_type, kind)
		VALUES ('00000000-0000-7000-8000-0000000000e1', 'adjustment:00000000-0000-7000-8000-0000000000a1',
		        'adjustment:00000000-0000-7000-8000-0000000000a1', 'USD', now(), 'Adjustment.v1', 'adjustment');
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
		    ('00000000-0000-7000-8000-0000000000e1', '1010', 'debit', 7, 'USD', NULL),
		    ('00000000-0000-7000-8000-0000000000e1', '2010', 'credit', 7, 'USD', 'w-1');
		COMMIT;`)
	require.NoError(t, err, "an adjustment written by plain SQL commits")

	// entry inserts a fresh entry (id ...02) in USD before the statement under test.
	const entry = `INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
		VALUES ('00000000-0000-7000-8000-000000000002', 'ev-2', 'tr-2', 'USD', now());`
	line := func(account, direction, amount, currency string) string {
		return `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
			('00000000-0000-7000-8000-000000000002', '` + account + `', '` + direction + `', ` + amount + `, '` + currency + `', 'w-1');`
	}
	tests := []struct {
		name    string
		sql     string
		sqlCode string // the SQLSTATE expected
		message string // a part of the message or the constraint's name
	}{
		{"an entry whose debits exceed its credits cannot commit",
			entry + line("1010", "debit", "5", "USD") + line("2010", "credit", "4", "USD"), "23514", "does not balance"},
		{"an entry with one line cannot commit",
			entry + line("1010", "debit", "5", "USD"), "23514", "does not balance"},
		{"an entry without lines cannot commit", entry, "23514", "does not balance"},
		{"an entry with a line in another currency cannot commit",
			entry + line("1010", "debit", "5", "USD") + line("2010", "credit", "5", "EUR"), "23514", "does not balance"},
		{"a multi-currency entry that nets to zero only across currencies cannot commit",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000002', 'ev-2', 'tr-2', 'XXX', now());` +
				line("1010", "debit", "5", "USD") + line("2010", "credit", "5", "EUR"), "23514", "does not balance"},
		{"a line of a batch entry is reversed at most once",
			`INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id, reverses_line_id)
			 SELECT '00000000-0000-7000-8000-000000000001'::uuid, account_code, CASE direction WHEN 'debit' THEN 'credit' ELSE 'debit' END,
			        amount, currency, wallet_id, id
			 FROM journal_lines WHERE entry_id = '00000000-0000-7000-8000-000000000001'
			 UNION ALL
			 SELECT '00000000-0000-7000-8000-000000000001'::uuid, account_code, CASE direction WHEN 'debit' THEN 'credit' ELSE 'debit' END,
			        amount, currency, wallet_id, id
			 FROM journal_lines WHERE entry_id = '00000000-0000-7000-8000-000000000001';`, "23505", "journal_lines_reverses_line_id_key"},
		{"a leg's kind is only on a batch leg's line",
			`INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id, leg_kind)
			 SELECT '00000000-0000-7000-8000-000000000001'::uuid, account_code, CASE direction WHEN 'debit' THEN 'credit' ELSE 'debit' END,
			        amount, currency, wallet_id, 'deposit'
			 FROM journal_lines WHERE entry_id = '00000000-0000-7000-8000-000000000001';`, "23514", "journal_lines_leg_kind_on_legs"},
		{"checking immediately instead of at commit does not help",
			"SET CONSTRAINTS ALL IMMEDIATE;" + entry, "23514", "does not balance"},
		{"lines added to a committed entry unbalance it",
			`INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency)
			 VALUES ('00000000-0000-7000-8000-000000000001', '1010', 'debit', 1, 'USD');`, "23514", "does not balance"},
		{"a line's amount cannot be changed", "UPDATE journal_lines SET amount = amount + 1;", "23001", "append-only"},
		{"a line cannot be moved to another account", "UPDATE journal_lines SET account_code = '2010';", "23001", "append-only"},
		{"a line cannot be deleted", "DELETE FROM journal_lines;", "23001", "append-only"},
		{"an entry cannot be changed", "UPDATE journal_entries SET transfer_id = 'tr-other';", "23001", "append-only"},
		{"an entry cannot be deleted", "DELETE FROM journal_entries;", "23001", "append-only"},
		{"a second entry for the same event is refused",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-1', 'tr-3', 'USD', now());`, "23505", "journal_entries_event_id_key"},
		{"a second entry for the same transfer is refused",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'tr-1', 'USD', now());`, "23505", "journal_entries_transfer_id_key"},
		{"a zero amount is refused",
			entry + line("1010", "debit", "0", "USD") + line("2010", "credit", "0", "USD"), "23514", "journal_lines_amount_check"},
		{"a negative amount is refused",
			entry + line("1010", "debit", "-5", "USD") + line("2010", "credit", "-5", "USD"), "23514", "journal_lines_amount_check"},
		{"an account outside the chart of accounts is refused",
			entry + line("9999", "debit", "5", "USD") + line("2010", "credit", "5", "USD"), "23503", "journal_lines_account_code_fkey"},
		{"an unknown direction is refused",
			entry + line("1010", "up", "5", "USD") + line("2010", "credit", "5", "USD"), "23514", "journal_lines_direction_check"},
		{"a lower-case currency on an entry is refused",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'tr-3', 'usd', now());`, "23514", "journal_entries_currency_check"},
		{"a two-letter currency on an entry is refused",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'tr-3', 'US', now());`, "23514", "journal_entries_currency_check"},
		{"a four-letter currency on a line is refused",
			entry + line("1010", "debit", "5", "USDX") + line("2010", "credit", "5", "USDX"), "23514", "journal_lines_currency_check"},
		{"an account's normal balance must follow its type",
			`INSERT INTO accounts (code, name, type, normal_balance) VALUES ('1020', 'Bad', 'asset', 'credit');`, "23514", "accounts_normal_balance_follows_type"},
		{"a transfer's entry cannot take an adjustment's key",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'adjustment:x', 'USD', now());`, "23514", "journal_entries_adjustment_key"},
		{"an adjustment's entry carries its key as its event id",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, event_type, kind)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'adjustment:x', 'USD', now(), 'Adjustment.v1', 'adjustment');`, "23514", "journal_entries_adjustment_key"},
		{"an entry of another kind cannot claim the adjustments' event type",
			`INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, event_type, kind)
			 VALUES ('00000000-0000-7000-8000-000000000003', 'ev-3', 'tr-3', 'USD', now(), 'Adjustment.v1', 'deposit');`, "23514", "journal_entries_adjustment_key"},
		{"an adjustment without its entry cannot commit",
			`INSERT INTO adjustments (id, entry_id, idempotency_key, request_hash, reason, created_by_key)
			 VALUES ('00000000-0000-7000-8000-0000000000a2', '00000000-0000-7000-8000-0000000000e2', 'fix-2',
			         decode(repeat('cd', 32), 'hex'), 'r', '00000000-0000-7000-8000-0000000000f1');`, "23503", "adjustments_entry_id_fkey"},
		{"a second adjustment with one Idempotency-Key is refused",
			`INSERT INTO adjustments (id, entry_id, idempotency_key, request_hash, reason, created_by_key)
			 VALUES ('00000000-0000-7000-8000-0000000000a2', '00000000-0000-7000-8000-000000000001', 'fix-1',
			         decode(repeat('cd', 32), 'hex'), 'r', '00000000-0000-7000-8000-0000000000f1');`, "23505", "adjustments_idempotency_key_key"},
		{"an adjustment's reason cannot be changed", "UPDATE adjustments SET reason = 'other';", "23001", "append-only"},
		{"an adjustment cannot be deleted", "DELETE FROM adjustments;", "23001", "append-only"},
		{"an account type outside the five is refused",
			`INSERT INTO accounts (code, name, type, normal_balance) VALUES ('1020', 'Bad', 'cash', 'credit');`, "23514", "accounts_type_check"},
	}
	// The group returns only when its parallel subtests are done, so the check after it sees
	// what all the attempts left behind.
	t.Run("each attempt is refused", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, err := b.pool.Exec(ctx, "BEGIN;"+tt.sql+"COMMIT;")
				require.Error(t, err)
				var pgErr *pgconn.PgError
				require.True(t, errors.As(err, &pgErr), "a database error, got %v", err)
				require.Equal(t, tt.sqlCode, pgErr.Code, pgErr.Message)
				require.Contains(t, pgErr.Message+" "+pgErr.ConstraintName, tt.message)
			})
		}
	})

	t.Run("after all attempts the ledger holds the balanced entry and the adjustment", func(t *testing.T) {
		var entries, lines, sum int64
		err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM journal_entries), count(*), coalesce(sum(signed_amount), 0)
			FROM gl_postings`).Scan(&entries, &lines, &sum)
		require.NoError(t, err)
		require.Equal(t, []int64{2, 4, 0}, []int64{entries, lines, sum})
	})
}
