-- Balance checkpoints bounded by transaction ids instead of pg_stat_activity. The bound of
-- 00004 was a second before the oldest transaction start pg_stat_activity showed; a session
-- with track_activities off, or one the GL's role may not see, shows none, and a checkpoint
-- then covered lines that committed after it, wrong for good since every later checkpoint
-- builds on it (docs/gl.md#balance-checkpoints).
--
-- A checkpoint now covers the lines posted before a reading of the clock taken before its
-- worker's own transaction id was assigned, and is taken only once every transaction id below
-- that one has ended (gl.Ledger.Checkpoint). That holds only if a line's posting time is read
-- after its transaction has an id: a transaction that read the clock first and got its id
-- after the worker's could still commit a line the checkpoint covers. So an entry's posting
-- time is read by journal_posting_time(), which gives the transaction its id first (what its
-- insert would do a moment later anyway), and a line carries its entry's time (PostBatch,
-- InsertLines), written in the entry's transaction.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION journal_posting_time() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    id xid8;
BEGIN
    id := pg_current_xact_id(); -- the transaction's id, assigned now if it has none
    RETURN clock_timestamp();
END;
$$;
-- +goose StatementEnd

ALTER TABLE journal_entries ALTER COLUMN posted_at SET DEFAULT journal_posting_time();
ALTER TABLE journal_lines ALTER COLUMN posted_at SET DEFAULT journal_posting_time();

-- +goose Down
ALTER TABLE journal_lines ALTER COLUMN posted_at SET DEFAULT clock_timestamp();
ALTER TABLE journal_entries ALTER COLUMN posted_at SET DEFAULT clock_timestamp();
DROP FUNCTION journal_posting_time();
