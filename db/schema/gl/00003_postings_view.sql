-- What the GL answers besides posting: balances as of a time, statements with running
-- balances, and an analysts' view of every line.
--
-- Balances are derived from the append-only lines, never kept in a row per account: every
-- transfer hits the same two accounts, and a locked balance row would serialise all posting
-- (see docs/gl.md for the measurement). The covering index below keeps the derived reads cheap:
-- balance, balance as of a time and a statement's opening balance are index-only scans over one
-- account and currency, in posting order.
--
-- The chart of accounts also gains a guard: an account's normal balance follows from its type,
-- so that a statement's running balance cannot be shown with the wrong sign.

-- +goose Up
CREATE INDEX journal_lines_account_posting_idx
    ON journal_lines (account_code, currency, posted_at, id) INCLUDE (direction, amount, entry_id);
DROP INDEX journal_lines_account_idx;

CREATE INDEX journal_entries_occurred_at_idx ON journal_entries (occurred_at);

ALTER TABLE accounts ADD CONSTRAINT accounts_normal_balance_follows_type CHECK (
    normal_balance = CASE WHEN type IN ('asset', 'expense') THEN 'debit' ELSE 'credit' END
);

-- gl_postings: one row per journal line, with its entry's event and transfer. signed_amount is
-- positive for a debit and negative for a credit, so sum(signed_amount) over any set of whole
-- entries is zero, and over one account is its balance seen from the debit side.
CREATE VIEW gl_postings AS
SELECT
    l.id                                                                AS line_id,
    l.entry_id,
    e.event_id,
    e.transfer_id,
    l.account_code,
    a.name                                                              AS account_name,
    a.type                                                              AS account_type,
    l.direction,
    (CASE WHEN l.direction = 'debit' THEN l.amount ELSE -l.amount END)::bigint AS signed_amount,
    l.amount,
    l.currency,
    e.occurred_at,
    l.posted_at
FROM journal_lines l
JOIN journal_entries e ON e.id = l.entry_id
JOIN accounts a ON a.code = l.account_code;

COMMENT ON VIEW gl_postings IS
    'One row per journal line; signed_amount is debit-positive, credit-negative (sums to zero per entry and per currency).';

-- +goose Down
DROP VIEW gl_postings;
ALTER TABLE accounts DROP CONSTRAINT accounts_normal_balance_follows_type;
DROP INDEX journal_entries_occurred_at_idx;
CREATE INDEX journal_lines_account_idx ON journal_lines (account_code, currency, posted_at, id);
DROP INDEX journal_lines_account_posting_idx;
