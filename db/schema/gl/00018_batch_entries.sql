-- Atomic batches: the wallet's TransferBatchCompleted.v1 is posted as ONE entry holding every
-- leg's lines, and its TransferBatchReversed.v1 as one entry reversing the chosen legs' lines.
-- A batch may span currencies, so an entry no longer has one currency:
--
-- * An entry balances in each currency of its lines (debits = credits per line currency), with
--   two lines or more. Its lines are all in its own currency, except on a multi-currency entry,
--   whose currency is ISO 4217's 'XXX' ("no currency"): its lines may be in any currencies.
-- * journal_lines.transfer_id is a line's leg tag: the leg's transfer id on a batch entry, the
--   leg reversal's id on a batch reversal's entry, NULL on every other line. A leg is found by
--   it (journal_lines_transfer_id_idx), and a leg id is never also an entry key.
-- * journal_lines.reverses_line_id is, on a batch reversal's line, the line it reverses: a line
--   is reversed at most once (journal_lines_reverses_line_id_key), which makes a leg reversed
--   twice impossible to commit.
--
-- The posting-rule guard of 00013 learns that a batch entry's legs were posted by the
-- TransferCompleted.v2 rules, in each line's currency.

-- +goose Up
ALTER TABLE journal_lines
    ADD COLUMN transfer_id text CHECK (transfer_id <> ''),
    ADD COLUMN reverses_line_id bigint REFERENCES journal_lines (id);

CREATE INDEX journal_lines_transfer_id_idx ON journal_lines (transfer_id) WHERE transfer_id IS NOT NULL;
CREATE UNIQUE INDEX journal_lines_reverses_line_id_key ON journal_lines (reverses_line_id) WHERE reverses_line_id IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION journal_lines_check_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT touched.entry_id AS id, s.line_count, s.unbalanced_currencies, s.foreign_currency
    INTO bad
    FROM (SELECT DISTINCT entry_id FROM new_lines) AS touched
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(c.lines), 0) AS line_count,
               count(*) FILTER (WHERE c.debits <> c.credits) AS unbalanced_currencies,
               coalesce(sum(c.lines) FILTER (WHERE c.currency <> e.currency AND e.currency <> 'XXX'), 0) AS foreign_currency
        FROM journal_entries e
        LEFT JOIN LATERAL (
            SELECT l.currency, count(*) AS lines,
                   coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0) AS debits,
                   coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0) AS credits
            FROM journal_lines l
            WHERE l.entry_id = e.id
            GROUP BY l.currency
        ) c ON true
        WHERE e.id = touched.entry_id
        GROUP BY e.id, e.currency
    ) AS s
    WHERE s.line_count < 2 OR s.unbalanced_currencies > 0 OR s.foreign_currency > 0
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'journal entry % does not balance: % lines, % currencies where debits <> credits, % lines in another currency',
            bad.id, bad.line_count, bad.unbalanced_currencies, bad.foreign_currency
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION posting_rules_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'posting_rules is append-only: set a new rule from a later time instead of UPDATE'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.effective_from <= clock_timestamp() THEN
        RAISE EXCEPTION 'posting rule % kind % currency "%" from % is in effect and cannot be withdrawn',
            OLD.event_type, OLD.kind, OLD.currency, OLD.effective_from
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM journal_entries e
               WHERE e.occurred_at >= OLD.effective_from
                 AND e.event_type = OLD.event_type AND e.kind = OLD.kind
                 AND (OLD.currency = '' OR e.currency = OLD.currency))
       OR (OLD.event_type = 'TransferCompleted.v2' AND EXISTS (
               SELECT 1 FROM journal_entries e
               JOIN journal_lines l ON l.entry_id = e.id
               WHERE e.event_type = 'TransferBatchCompleted.v1' AND e.occurred_at >= OLD.effective_from
                 AND (OLD.currency = '' OR l.currency = OLD.currency))) THEN
        RAISE EXCEPTION 'posting rule % kind % currency "%" from % covers an entry already posted and cannot be withdrawn',
            OLD.event_type, OLD.kind, OLD.currency, OLD.effective_from
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN OLD;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION posting_rules_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'posting_rules is append-only: set a new rule from a later time instead of UPDATE'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.effective_from <= clock_timestamp() THEN
        RAISE EXCEPTION 'posting rule % kind % currency "%" from % is in effect and cannot be withdrawn',
            OLD.event_type, OLD.kind, OLD.currency, OLD.effective_from
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM journal_entries e
               WHERE e.occurred_at >= OLD.effective_from
                 AND e.event_type = OLD.event_type AND e.kind = OLD.kind
                 AND (OLD.currency = '' OR e.currency = OLD.currency)) THEN
        RAISE EXCEPTION 'posting rule % kind % currency "%" from % covers an entry already posted and cannot be withdrawn',
            OLD.event_type, OLD.kind, OLD.currency, OLD.effective_from
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN OLD;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION journal_lines_check_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT touched.entry_id AS id, s.line_count, s.debits, s.credits, s.foreign_currency
    INTO bad
    FROM (SELECT DISTINCT entry_id FROM new_lines) AS touched
    CROSS JOIN LATERAL (
        SELECT count(l.id) AS line_count,
               coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0) AS debits,
               coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0) AS credits,
               count(l.id) FILTER (WHERE l.currency <> e.currency) AS foreign_currency
        FROM journal_entries e
        LEFT JOIN journal_lines l ON l.entry_id = e.id
        WHERE e.id = touched.entry_id
    ) AS s
    WHERE s.line_count < 2 OR s.debits <> s.credits OR s.foreign_currency > 0
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'journal entry % does not balance: % lines, debits %, credits %, % lines in another currency',
            bad.id, bad.line_count, bad.debits, bad.credits, bad.foreign_currency
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP INDEX journal_lines_reverses_line_id_key;
DROP INDEX journal_lines_transfer_id_idx;
ALTER TABLE journal_lines DROP COLUMN reverses_line_id, DROP COLUMN transfer_id;
