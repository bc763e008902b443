-- name: RecordInboxFailure :exec
-- RecordInboxFailure dead-letters an event in the inbox with its reason (a stable word), the
-- error's detail and its raw payload. It never overwrites an event that was processed, nor one
-- an operator resolved (its record stands).
INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, reason, detail, payload, attempts)
VALUES (@id, @consumer, @event_id, @event_type, 'failed', @stream_seq::bigint, @reason::text, @detail::text, @payload, @attempts)
ON CONFLICT (id) DO UPDATE
SET status     = 'failed',
    reason     = excluded.reason,
    detail     = excluded.detail,
    payload    = excluded.payload,
    attempts   = excluded.attempts,
    updated_at = clock_timestamp()
WHERE inbox.status NOT IN ('processed', 'resolved');

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

-- name: InboxFailureReasons :many
-- InboxFailureReasons counts the failed rows per reason word (inbox stats): unauthenticated
-- ones are someone publishing as a producer they are not.
SELECT reason::text AS reason, count(*)::bigint AS count
FROM inbox
WHERE status = 'failed'
GROUP BY reason
ORDER BY reason;

-- name: ReclaimFailedInbox :one
-- ReclaimFailedInbox moves a failed or waiting event back to processing for an operator's retry,
-- inside the same transaction that processes it again.
UPDATE inbox
SET status = 'processing', attempts = attempts + 1, updated_at = clock_timestamp()
WHERE id = @id AND status IN ('failed', 'waiting')
RETURNING *;

-- name: ReclaimWaitingInbox :one
-- ReclaimWaitingInbox moves a waiting event to processing for the consumer's own retry, inside
-- the transaction that applies it. A row another transaction holds (another GL instance's
-- retry, an operator's) is skipped rather than waited for: that one applies it.
UPDATE inbox
SET status = 'processing', attempts = attempts + 1, updated_at = clock_timestamp()
WHERE id = (SELECT w.id FROM inbox AS w WHERE w.id = @id AND w.status = 'waiting' FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: ClaimInboxBatch :many
-- ClaimInboxBatch claims a whole fetched batch in one statement (ids must be distinct). A new
-- row is written processed at once: the claim, the handler's writes and the row commit or roll
-- back together, so no other transaction can see it in between, and a second UPDATE of every
-- row to mark it processed would only cost the database a new version of each.
INSERT /* fixed plan */ INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
SELECT c.id, @consumer::text, c.event_id, c.event_type, 'processed', c.stream_seq, clock_timestamp()
FROM (SELECT unnest(@ids::text[]) AS id, unnest(@event_ids::text[]) AS event_id,
             unnest(@event_types::text[]) AS event_type, unnest(@stream_seqs::bigint[]) AS stream_seq) AS c
ON CONFLICT (id) DO UPDATE
SET duplicates        = inbox.duplicates + 1,
    last_duplicate_at = clock_timestamp()
RETURNING inbox.id, (xmax = 0)::boolean AS inserted, inbox.status;

-- name: MarkInboxProcessedBatch :execrows
-- MarkInboxProcessedBatch ends an operator's retry of failed rows (ReclaimFailedInbox).
UPDATE inbox
SET status = 'processed', processed_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = ANY (@ids::text[]) AND status = 'processing';

-- name: CountInboxDuplicates :exec
-- CountInboxDuplicates counts copies of an event that came within one claimed batch (the claim
-- statement can touch each row once): one id per extra copy.
UPDATE inbox
SET duplicates        = inbox.duplicates + c.copies,
    last_duplicate_at = clock_timestamp()
FROM (SELECT id, count(*)::int AS copies FROM unnest(@ids::text[]) AS id GROUP BY id) AS c
WHERE inbox.id = c.id;

-- name: DeleteExpiredInbox :execrows
-- DeleteExpiredInbox deletes up to batch_size rows of consumer's processed events that the
-- inbox has not seen since before (their processing or latest duplicate; their arrival when
-- they have neither), oldest first, through inbox_retention_idx. Rows another transaction
-- holds (a duplicate being claimed, another process's deletion) are skipped, so the statement
-- never waits on a row lock. Only the listed statuses are deleted: never a failed row, nor a
-- status this list does not name.
DELETE FROM inbox
WHERE id IN (
    SELECT d.id
    FROM inbox d
    WHERE d.consumer = @consumer::text
      AND d.status IN ('processed', 'duplicate')
      AND coalesce(greatest(d.processed_at, d.last_duplicate_at), d.received_at) < @before::timestamptz
    ORDER BY coalesce(greatest(d.processed_at, d.last_duplicate_at), d.received_at)
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
);

-- name: RecordInboxWaiting :exec
-- RecordInboxWaiting parks an event that waits for another (waits_for) with its verified raw
-- payload. A row already there is updated only while it waits: one processed or failed
-- meanwhile (another consumer got there first) is left alone.
INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, waits_for, detail, payload, attempts)
VALUES (@id, @consumer, @event_id, @event_type, 'waiting', @stream_seq::bigint, @waits_for::text, @detail::text, @payload, @attempts)
ON CONFLICT (id) DO UPDATE
SET waits_for  = excluded.waits_for,
    detail     = excluded.detail,
    payload    = excluded.payload,
    updated_at = clock_timestamp()
WHERE inbox.status = 'waiting';

-- name: WaitingInboxFor :many
-- WaitingInboxFor is the consumer's waiting events that wait for one of keys (inbox_waiting_idx).
SELECT id FROM inbox
WHERE status = 'waiting' AND waits_for = ANY (@keys::text[]) AND consumer = @consumer
ORDER BY received_at, id;

-- name: WaitingInbox :many
-- WaitingInbox is the consumer's oldest waiting events, whatever they wait for.
SELECT id FROM inbox
WHERE status = 'waiting' AND consumer = @consumer
ORDER BY received_at, id
LIMIT @row_limit;

-- name: InboxWaitingSummary :one
-- InboxWaitingSummary counts the consumer's waiting events and gives the oldest one's arrival
-- (now: none), from the partial index alone.
SELECT count(*)::bigint AS count, coalesce(min(received_at), clock_timestamp())::timestamptz AS oldest
FROM inbox
WHERE status = 'waiting' AND consumer = @consumer;

-- name: AbandonWaitingInbox :one
-- AbandonWaitingInbox gives up on a waiting event for an operator: it is failed as abandoned,
-- with its payload kept, so that inbox retry can still apply it later.
UPDATE inbox
SET status = 'failed', reason = 'abandoned', detail = @detail::text, updated_at = clock_timestamp()
WHERE id = @id AND status = 'waiting'
RETURNING *;

-- name: ResolveFailedInbox :one
-- ResolveFailedInbox closes a failed event for an operator: it becomes resolved, its reason,
-- detail and payload kept, with who resolved it, when and why. Only a failed row moves.
UPDATE inbox
SET status = 'resolved', resolved_at = clock_timestamp(), resolved_by = @resolved_by::text,
    resolution = @resolution::text, updated_at = clock_timestamp()
WHERE id = @id AND status = 'failed'
RETURNING *;

-- name: RecentUnauthenticatedInbox :one
-- RecentUnauthenticatedInbox counts the consumer's failed (not resolved) unauthenticated events
-- recorded since a time, and gives the newest one's time (now: none), from inbox_failed_idx.
SELECT count(*)::bigint AS count, coalesce(max(updated_at), clock_timestamp())::timestamptz AS newest
FROM inbox
WHERE status = 'failed' AND reason = 'unauthenticated' AND consumer = @consumer::text
  AND updated_at >= @since::timestamptz;
