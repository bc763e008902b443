-- A rule set for a later time may be withdrawn (deleted) until it takes effect: it has posted
-- nothing, so the books lose nothing, and the audit trail keeps the withdrawn rule. Once in
-- effect, by the database's clock or by an entry posted under it (an event whose own time is
-- at or after its effective_from), it is part of how the journal was posted, and stays. A rule
-- is never updated: a change is a new rule from a later time.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION posting_rules_guard() RETURNS trigger
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

DROP TRIGGER posting_rules_append_only ON posting_rules;
CREATE TRIGGER posting_rules_guard
    BEFORE UPDATE OR DELETE ON posting_rules
    FOR EACH ROW EXECUTE FUNCTION posting_rules_guard();

-- +goose Down
DROP TRIGGER posting_rules_guard ON posting_rules;
DROP FUNCTION posting_rules_guard();
CREATE TRIGGER posting_rules_append_only
    BEFORE UPDATE OR DELETE ON posting_rules
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();
