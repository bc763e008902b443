-- The checks of `gl verify`. Each returns at most row_limit offending rows, each carrying the
-- total number of offenders (count(*) OVER () is computed before the LIMIT).

-- name: CountLedger :one
SELECT
    (SELECT count(*) FROM journal_entries)::bigint AS entries,
    (SELECT count(*) FROM journal_lines)::bigint   AS lines;

-- name: UnbalancedEntries :many
-- The deferred trigger makes this impossible to commit; verify still looks, because a trigger
-- can be disabled by the tables' owner. The sums are compared as numeric, so that a check
-- never fails on totals beyond int64.
SELECT e.id, e.event_id, count(*) OVER ()::bigint AS total
FROM journal_entries e
LEFT JOIN journal_lines l ON l.entry_id = e.id
GROUP BY e.id
HAVING count(l.id) < 2
    OR coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)
       <> coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)
    OR count(l.id) FILTER (WHERE l.currency <> e.currency) > 0
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: CountProcessedInbox :one
SELECT count(*)::bigint
FROM inbox
WHERE consumer = @consumer AND event_type = @event_type AND status = 'processed';

-- name: ProcessedInboxWithoutEntry :many
-- An event the inbox says was handled, but no journal entry carries its id.
SELECT i.id, i.event_id, count(*) OVER ()::bigint AS total
FROM inbox i
WHERE i.consumer = @consumer AND i.event_type = @event_type AND i.status = 'processed'
  AND NOT EXISTS (SELECT 1 FROM journal_entries e WHERE e.event_id = i.event_id)
ORDER BY i.received_at, i.id
LIMIT @row_limit;

-- name: EntriesWithoutInbox :many
-- An entry whose event the inbox never recorded as processed: written around the consumer.
SELECT e.id, e.event_id, count(*) OVER ()::bigint AS total
FROM journal_entries e
WHERE NOT EXISTS (
    SELECT 1 FROM inbox i WHERE i.id = @consumer::text || ':' || e.event_id AND i.status = 'processed'
)
ORDER BY e.posted_at, e.id
LIMIT @row_limit;
