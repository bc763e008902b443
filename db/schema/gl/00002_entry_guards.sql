-- Invariant 4 says every entry balances "enforced by the GL database", not only by the code
-- that happens to write it today: a deferred constraint trigger checks each entry at commit,
-- once its lines are in. The ledger is also append-only: a posting is corrected by another
-- posting, never by rewriting history, so UPDATE and DELETE are refused. TRUNCATE stays
-- possible on purpose: rebuilding the GL by replaying the stream starts from empty tables.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION journal_entry_check_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    entry      uuid;
    line_count bigint;
    debits     numeric;
    credits    numeric;
    foreign_currency bigint;
BEGIN
    IF TG_TABLE_NAME = 'journal_entries' THEN
        entry := NEW.id;
    ELSE
        entry := NEW.entry_id;
    END IF;
    SELECT count(l.id),
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0),
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0),
           count(l.id) FILTER (WHERE l.currency <> e.currency)
    INTO line_count, debits, credits, foreign_currency
    FROM journal_entries e
    LEFT JOIN journal_lines l ON l.entry_id = e.id
    WHERE e.id = entry;
    IF line_count < 2 OR debits <> credits OR foreign_currency > 0 THEN
        RAISE EXCEPTION 'journal entry % does not balance: % lines, debits %, credits %, % lines in another currency',
            entry, line_count, debits, credits, foreign_currency
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER journal_entries_balanced
    AFTER INSERT ON journal_entries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION journal_entry_check_balanced();

CREATE CONSTRAINT TRIGGER journal_lines_balanced
    AFTER INSERT ON journal_lines
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION journal_entry_check_balanced();

-- +goose StatementBegin
CREATE FUNCTION journal_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: post a correcting entry instead of %', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER journal_entries_append_only
    BEFORE UPDATE OR DELETE ON journal_entries
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();

CREATE TRIGGER journal_lines_append_only
    BEFORE UPDATE OR DELETE ON journal_lines
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();

-- +goose Down
DROP TRIGGER journal_lines_append_only ON journal_lines;
DROP TRIGGER journal_entries_append_only ON journal_entries;
DROP FUNCTION journal_refuse_change();
DROP TRIGGER journal_lines_balanced ON journal_lines;
DROP TRIGGER journal_entries_balanced ON journal_entries;
DROP FUNCTION journal_entry_check_balanced();
