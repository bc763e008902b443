-- A batch leg's kind (deposit, transfer, …), on its lines: journal_lines.leg_kind is the kind
-- whose TransferCompleted.v2 rule made a batch leg's two lines, copied onto the lines of a
-- batch reversal that reverse them; NULL on every line that is no batch leg's, and on the legs
-- posted before this migration (their kind was not kept). With it, gl verify holds each leg to
-- its own kind's rule, and a rule that made a leg cannot be withdrawn.

-- +goose Up
ALTER TABLE journal_lines
    ADD COLUMN leg_kind text CHECK (leg_kind <> ''),
    ADD CONSTRAINT journal_lines_leg_kind_on_legs CHECK (leg_kind IS NULL OR transfer_id IS NOT NULL);

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
                 AND (l.leg_kind IS NULL OR l.leg_kind = OLD.kind)
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

ALTER TABLE journal_lines DROP CONSTRAINT journal_lines_leg_kind_on_legs, DROP COLUMN leg_kind;
