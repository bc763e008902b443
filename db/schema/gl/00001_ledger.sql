-- The general ledger: chart of accounts, journal entries and their lines. The inbox and the
-- GL's own outbox (TransferPosted.v1) live in the events set (db/schema/events), applied first.

-- +goose Up
CREATE TABLE accounts (
    code           text PRIMARY KEY CHECK (code ~ '^[A-Za-z0-9._-]{1,32}$'),
    name           text        NOT NULL,
    type           text        NOT NULL CHECK (type IN ('asset', 'liability', 'equity', 'revenue', 'expense')),
    normal_balance text        NOT NULL CHECK (normal_balance IN ('debit', 'credit')),
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO accounts (code, name, type, normal_balance) VALUES
    ('1010', 'Cash held for wallets', 'asset', 'debit'),
    ('2010', 'Wallet balances owed to customers', 'liability', 'credit');

CREATE TABLE journal_entries (
    id          uuid PRIMARY KEY,
    event_id    text        NOT NULL,
    transfer_id text        NOT NULL,
    currency    text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    description text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL,
    posted_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT journal_entries_event_id_key UNIQUE (event_id),
    CONSTRAINT journal_entries_transfer_id_key UNIQUE (transfer_id)
);

CREATE INDEX journal_entries_posted_at_idx ON journal_entries (posted_at, id);

CREATE TABLE journal_lines (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id     uuid        NOT NULL REFERENCES journal_entries (id),
    account_code text        NOT NULL REFERENCES accounts (code),
    direction    text        NOT NULL CHECK (direction IN ('debit', 'credit')),
    amount       bigint      NOT NULL CHECK (amount > 0),
    currency     text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    posted_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX journal_lines_entry_idx ON journal_lines (entry_id);
CREATE INDEX journal_lines_account_idx ON journal_lines (account_code, currency, posted_at, id);

-- +goose Down
DROP TABLE journal_lines;
DROP TABLE journal_entries;
DROP TABLE accounts;
