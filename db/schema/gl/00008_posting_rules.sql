-- Posting rules as data: which accounts an event is posted to, by the event's type
-- and the transfer's kind, effective-dated. A rule is never updated or deleted: a change is a
-- new row effective from a later time, and the entry posted under a rule keeps its lines (the
-- journal is append-only). Posting picks, for an event, the row of its type and kind with the
-- latest effective_from at or before the event's own time (the transfer's created_at), so a
-- replay posts every event exactly as the live consumer did.

-- +goose Up
-- 2020 is the holds' account (GL migration 00007 adds it too; whichever runs first wins).
INSERT INTO accounts (code, name, type, normal_balance)
VALUES ('2020', 'Funds on hold for wallets', 'liability', 'credit')
ON CONFLICT (code) DO NOTHING;

CREATE TABLE posting_rules (
    event_type     text        NOT NULL CHECK (event_type ~ '^[A-Za-z]+\.v[0-9]+$'),
    kind           text        NOT NULL CHECK (kind ~ '^[a-z_]{1,32}$'),
    effective_from timestamptz NOT NULL,
    debit_account  text        NOT NULL REFERENCES accounts (code),
    credit_account text        NOT NULL REFERENCES accounts (code),
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (event_type, kind, effective_from),
    -- Debit and credit on one account only for a movement between customers inside it.
    CONSTRAINT posting_rules_accounts_differ CHECK (debit_account <> credit_account OR kind = 'transfer')
);

CREATE TRIGGER posting_rules_append_only
    BEFORE UPDATE OR DELETE ON posting_rules
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();

INSERT INTO posting_rules (event_type, kind, effective_from, debit_account, credit_account) VALUES
    -- Today's rule: a TransferCompleted.v1 does not say its kind.
    ('TransferCompleted.v1', 'unspecified', '-infinity', '1010', '2010'),
    -- Money entering from an external (allow-negative) wallet: cash and what is owed both grow.
    ('TransferCompleted.v2', 'deposit',     '-infinity', '1010', '2010'),
    -- Wallet to wallet: one customer's balance becomes another's; cash is unchanged.
    ('TransferCompleted.v2', 'transfer',    '-infinity', '2010', '2010'),
    -- Money leaving to an external wallet: cash and what is owed both shrink.
    ('TransferCompleted.v2', 'withdrawal',  '-infinity', '2010', '1010'),
    ('HoldPlaced.v1',        'hold',        '-infinity', '2010', '2020'),
    ('HoldCaptured.v1',      'hold',        '-infinity', '2020', '2010'),
    ('HoldVoided.v1',        'hold',        '-infinity', '2020', '2010');

-- Which rule posted an entry: its event type and kind (with occurred_at, the rule's key).
-- Entries posted before this migration were all TransferCompleted.v1 under today's rule; a
-- reversal's entry carries its original's, whose lines it swaps.
ALTER TABLE journal_entries
    ADD COLUMN event_type text NOT NULL DEFAULT 'TransferCompleted.v1',
    ADD COLUMN kind       text NOT NULL DEFAULT 'unspecified';

-- +goose Down
ALTER TABLE journal_entries DROP COLUMN kind, DROP COLUMN event_type;
DROP TABLE posting_rules;
