-- name: ClaimInbox :one
-- ClaimInbox is the inbox's claim. A primary-key conflict means this consumer has seen the event
-- before: the row is not restarted, only its duplicate counter moves, and inserted is false.
INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq)
VALUES (@id, @consumer, @event_id, @event_type, 'processing', @stream_seq::bigint)
ON CONFLICT (id) DO UPDATE
SET duplicates        = inbox.duplicates + 1,
    last_duplicate_at = clock_timestamp()
RETURNING (xmax = 0)::boolean AS inserted, status;

-- name: MarkInboxProcessed :execrows
UPDATE inbox
SET status = 'processed', processed_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = @id AND status = 'processing';

-- name: RecordInboxFailure :exec
-- RecordInboxFailure dead-letters an event in the inbox with its reason (a stable word), the
-- error's detail and its raw payload. It never overwrites an event that was processed.
INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, reason, detail, payload, attempts)
VALUES (@id, @consumer, @event_id, @event_type, 'failed', @stream_seq::bigint, @reason::text, @detail::text, @payload, @attempts)
ON CONFLICT (id) DO UPDATE
SET status     = 'failed',
    reason     = excluded.reason,
    detail     = excluded.detail,
    payload    = excluded.payload,
    attempts   = excluded.attempts,
    updated_at = clock_timestamp()
WHERE inbox.status <> 'processed';

-- name: GetInbox :one
SELECT * FROM inbox WHERE id = @id;

-- name: ListInbox :many
SELECT * FROM inbox
WHERE status = @status
ORDER BY received_at, id
LIMIT @row_limit;

-- name: InboxStatusCounts :many
SELECT status, count(*)::bigint AS count, coalesce(sum(duplicates), 0)::bigint AS duplicates
FROM inbox
GROUP BY status
ORDER BY status;

-- name: ReclaimFailedInbox :one
-- ReclaimFailedInbox moves a failed event back to processing for an operator's retry, inside the
-- same transaction that processes it again.
UPDATE inbox
SET status = 'processing', attempts = attempts + 1, updated_at = clock_timestamp()
WHERE id = @id AND status = 'failed'
RETURNING *;

-- name: ClaimInboxBatch :many
-- ClaimInbox for a whole fetched batch in one statement (ids must be distinct).
INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq)
SELECT c.id, @consumer::text, c.event_id, c.event_type, 'processing', c.stream_seq
FROM (SELECT unnest(@ids::text[]) AS id, unnest(@event_ids::text[]) AS event_id,
             unnest(@event_types::text[]) AS event_type, unnest(@stream_seqs::bigint[]) AS stream_seq) AS c
ON CONFLICT (id) DO UPDATE
SET duplicates        = inbox.duplicates + 1,
    last_duplicate_at = clock_timestamp()
RETURNING inbox.id, (xmax = 0)::boolean AS inserted, inbox.status;

-- name: MarkInboxProcessedBatch :execrows
UPDATE inbox
SET status = 'processed', processed_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = ANY (@ids::text[]) AND status = 'processing';
