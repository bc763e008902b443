-- The balance check of 00002 ran once per entry and once per line, deferred to commit: three
-- lookups of the same entry's lines for every posting, 300 queries at the commit of a consumer
-- batch of 100 events. Lines are checked per statement instead: one query over the statement's
-- transition table checks every entry it wrote lines for, right after the INSERT. The deferred
-- trigger per entry stays, so an entry that never gets lines still fails at commit.
--
-- The rule this makes explicit: an entry's lines balance in each statement that inserts them
-- (every writer inserts an entry's lines in one statement: PostBatch, InsertLines). Lines added
-- to an entry later must balance among themselves, as before they had to keep the entry
-- balanced; the journal is append-only, so no other change is possible.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION journal_lines_check_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT e.id,
           count(l.id) AS line_count,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0) AS debits,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0) AS credits,
           count(l.id) FILTER (WHERE l.currency <> e.currency) AS foreign_currency
    INTO bad
    FROM (SELECT DISTINCT entry_id FROM new_lines) AS touched
    JOIN journal_entries e ON e.id = touched.entry_id
    LEFT JOIN journal_lines l ON l.entry_id = e.id
    GROUP BY e.id
    HAVING count(l.id) < 2
        OR coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)
           <> coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)
        OR count(l.id) FILTER (WHERE l.currency <> e.currency) > 0
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

DROP TRIGGER journal_lines_balanced ON journal_lines;

CREATE TRIGGER journal_lines_balanced
    AFTER INSERT ON journal_lines
    REFERENCING NEW TABLE AS new_lines
    FOR EACH STATEMENT EXECUTE FUNCTION journal_lines_check_balanced();

-- +goose Down
DROP TRIGGER journal_lines_balanced ON journal_lines;
DROP FUNCTION journal_lines_check_balanced();

CREATE CONSTRAINT TRIGGER journal_lines_balanced
    AFTER INSERT ON journal_lines
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION journal_entry_check_balanced();
