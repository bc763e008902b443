-- The console's transfer list: newest first, before a cursor, each query bounded by an index
-- however many transfers there are. A zero cursor (NULLs) starts at the newest. With an owner,
-- only the transfers from or to the owner's wallets, as in ListTransfers.

-- name: ListTransfersNewest :many
-- Every transfer: transfers_created_at_idx walked backwards, stopping at the page's end.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE (t.created_at, t.id) < (coalesce(sqlc.narg('before_created_at')::timestamptz, 'infinity'::timestamptz),
                              coalesce(sqlc.narg('before_id')::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at DESC, t.id DESC
LIMIT @row_limit;

-- name: ListTransfersNewestAcknowledged :many
-- The transfers whose event is acknowledged (or deleted by retention after it): most are, so
-- transfers_created_at_idx is walked backwards past the few whose outbox row is not, each
-- looked up by its primary key.
SELECT sqlc.embed(t), 'acknowledged'::text AS outbox_status
FROM transfers t
WHERE (t.created_at, t.id) < (coalesce(sqlc.narg('before_created_at')::timestamptz, 'infinity'::timestamptz),
                              coalesce(sqlc.narg('before_id')::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = t.event_id AND o.status <> 'acknowledged')
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at DESC, t.id DESC
LIMIT @row_limit;

-- name: ListTransfersNewestByEventStatus :many
-- The transfers whose event is not acknowledged and at @status ('unacknowledged': any such):
-- the outbox rows not acknowledged, each status an arm that its partial index answers (a
-- generic plan cannot match a parameter to an index's predicate, and without statistics
-- "status <> 'acknowledged'" looks like every row), then the transfers of each. A page costs
-- the backlog, not the number of transfers.
WITH events AS MATERIALIZED (
    SELECT o.id, o.status, o.aggregate_id FROM outbox o
    WHERE (o.status = 'pending' AND @status::text IN ('pending', 'unacknowledged'))
       OR (o.status = 'dispatching' AND @status::text IN ('dispatching', 'unacknowledged'))
       OR (o.status = 'dispatched' AND @status::text IN ('dispatched', 'unacknowledged'))
       OR (o.status = 'failed' AND @status::text IN ('failed', 'unacknowledged'))
       OR (o.status = 'dead_letter' AND @status::text IN ('dead_letter', 'unacknowledged'))
), matched AS MATERIALIZED (
    -- A transfer, reversal or capture's transfer with an event of its own is that event's
    -- aggregate; legs and batch-made reversals share their batch's (or batch reversal's). Each arm goes through a unique or primary key (a partial
    -- index on event_id looks nearly empty before an ANALYZE and would be scanned whole).
    SELECT t.id, e.status FROM events e
    JOIN transfers t ON t.id = CASE WHEN e.aggregate_id ~ '^[0-9a-fA-F-]{36}$' THEN e.aggregate_id::uuid END
                    AND t.event_id = e.id
    UNION ALL
    SELECT t.id, e.status FROM events e
    JOIN transfer_batches b ON b.event_id = e.id
    JOIN transfers t ON t.batch_id = b.id AND t.batch_id IS NOT NULL
    UNION ALL
    SELECT t.id, e.status FROM events e
    JOIN batch_reversals r ON r.event_id = e.id
    JOIN transfers t ON t.batch_reversal_id = r.id AND t.batch_reversal_id IS NOT NULL
)
SELECT sqlc.embed(t), m.status::text AS outbox_status
FROM matched m
JOIN transfers t ON t.id = m.id
WHERE (t.created_at, t.id) < (coalesce(sqlc.narg('before_created_at')::timestamptz, 'infinity'::timestamptz),
                              coalesce(sqlc.narg('before_id')::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid))
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at DESC, t.id DESC
LIMIT @row_limit;
