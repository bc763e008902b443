-- Inbox retention (EVENTS_INBOX_RETENTION): the rows of events a consumer processed are deleted
-- once the inbox has not seen their event for the retention, oldest first, a batch at a time
-- (DeleteExpiredInbox). A row's age runs from the last time its event came: its processing or
-- its latest duplicate, or its arrival for a row with neither. Only the statuses listed here
-- are ever deleted; failed rows, and every other status, stay. The index holds exactly those
-- rows, in the order the deletion takes them.
--
-- Built CONCURRENTLY (outside a transaction): an inbox that was never pruned may be large, and
-- a plain build would hold its consumers' claims for as long. A build that fails leaves an
-- INVALID index: drop it (DROP INDEX CONCURRENTLY inbox_retention_idx) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY inbox_retention_idx
    ON inbox (consumer, (coalesce(greatest(processed_at, last_duplicate_at), received_at)))
    WHERE status IN ('processed', 'duplicate');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS inbox_retention_idx;
