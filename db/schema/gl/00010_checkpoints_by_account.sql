-- A balance checkpoint looked up by its account and currency: a read of one account's balance
-- (now, as of a time, a statement's opening balance) finds the latest checkpoint row at or
-- before its time in one descent of this index, instead of the latest checkpoint's time in the
-- primary key first and then its row. Any checkpoint row is the account's totals up to its
-- time, so the read is exact whichever row it starts from.
--
-- The reads' bounds (db/queries/gl/entries.sql) are also written so that they are index
-- conditions in any plan: a bound written `$1 IS NULL OR col <= $1` was one only in a plan
-- made for the value, and a prepared statement's generic plan (which PostgreSQL may choose
-- after five executions; the services plan each execution unless their URL says otherwise)
-- filtered the account's whole history instead (docs/gl.md#reads-that-do-not-grow-with-the-ledger).

-- +goose Up
CREATE INDEX balance_checkpoints_account_idx
    ON balance_checkpoints (account_code, currency, through) INCLUDE (debits, credits);

-- +goose Down
DROP INDEX balance_checkpoints_account_idx;
