-- Balance checkpoints: what makes a balance, a balance as of a time, a statement's opening
-- balance and the trial balance cost the same whatever the ledger's size. A checkpoint is the
-- running total of every account and currency over every line posted at or before its
-- `through` time; a read takes the latest checkpoint at or before the time it asks about and
-- adds the lines posted after it (a few seconds' worth, through the covering indexes).
--
-- Like the journal, checkpoints are append-only (the runtime role may SELECT and INSERT) and
-- are never written by a posting: the GL takes them (GL_CHECKPOINT_LINES, GL_CHECKPOINT_INTERVAL) in the
-- background, so there is no balance row a posting would lock. `through` is always before the
-- start of every transaction still open when the checkpoint is taken, so no line can commit
-- later with a posting time the checkpoint covers (docs/gl.md#balance-checkpoints).

-- +goose Up
CREATE TABLE balance_checkpoints (
    through      timestamptz NOT NULL,
    account_code text        NOT NULL REFERENCES accounts (code),
    currency     text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    debits       numeric     NOT NULL CHECK (debits >= 0),
    credits      numeric     NOT NULL CHECK (credits >= 0),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (through, account_code, currency)
);

-- The lines after a checkpoint, over all accounts: the next checkpoint and the trial balance.
CREATE INDEX journal_lines_posted_at_idx ON journal_lines (posted_at) INCLUDE (account_code, currency, direction, amount);

-- +goose Down
DROP INDEX journal_lines_posted_at_idx;
DROP TABLE balance_checkpoints;
