-- The GL's own tables (db/queries/gl). The journal is append-only: SELECT and INSERT, never
-- UPDATE, DELETE or TRUNCATE (a replay rebuilds into a new database instead, gl replay).

-- journal_lines.id is an identity column: an insert needs no USAGE on its sequence.
GRANT SELECT, INSERT ON journal_entries, journal_lines TO :"runtime_role";

-- Balance checkpoints are taken by serve (gl.Ledger.Checkpoint) and, past
-- GL_CHECKPOINT_RETENTION, thinned to the last of each day by serve: never updated.
GRANT SELECT, INSERT, DELETE ON balance_checkpoints TO :"runtime_role";

-- The chart of accounts is read by every posting and grows with gl accounts add; an account is
-- never redefined or removed.
GRANT SELECT, INSERT ON accounts TO :"runtime_role";

-- gl_postings is the analysts' view: the service never reads it (docs/database-roles.md).

-- Posting rules are read by every batch and grow with gl rules set; a rule is never changed (a
-- change is a new row effective from a later time). gl rules withdraw deletes a rule not yet in
-- effect; the trigger posting_rules_guard refuses to delete one in effect, to any role.
GRANT SELECT, INSERT, DELETE ON posting_rules TO :"runtime_role";

-- Adjustments are posted by POST /v1/adjustments with their journal entry and read with it;
-- like the journal, an adjustment is never changed or removed.
GRANT SELECT, INSERT ON adjustments TO :"runtime_role";
