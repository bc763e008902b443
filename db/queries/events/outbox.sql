-- name: InsertOutboxBatch :execrows
-- InsertOutboxBatch writes many events in one statement (one NOTIFY: the trigger is per statement).
-- An empty trace context is stored NULL (the row was written untraced).
INSERT /* fixed plan */ INTO outbox (id, event_type, aggregate_id, payload, trace_context)
SELECT unnest(@ids::uuid[]), unnest(@event_types::text[]), unnest(@aggregate_ids::text[]), unnest(@payloads::jsonb[]),
       nullif(unnest(@trace_contexts::text[]), '');

-- name: InsertOutboxBatchClaimed :execrows
-- InsertOutboxBatchClaimed writes events already claimed by the relay of the writing process
-- (publish on commit): the claim is part of the insert, so the happy path costs no claim
-- round trip and no second version of the row. If that process dies before it publishes, the
-- lease runs out and any relay's ClaimOutbox takes the rows, as for any other claim.
INSERT /* fixed plan */ INTO outbox (id, event_type, aggregate_id, payload, trace_context, status, attempts, lease_owner, lease_until)
SELECT unnest(@ids::uuid[]), unnest(@event_types::text[]), unnest(@aggregate_ids::text[]), unnest(@payloads::jsonb[]),
       nullif(unnest(@trace_contexts::text[]), ''),
       'dispatching', 1, @owner::text, clock_timestamp() + make_interval(secs => @lease_seconds::float8);

-- name: ClaimOutbox :many
-- ClaimOutbox takes rows that are due for a publish: new ones, failed ones whose backoff ran
-- out, and rows whose relay died holding them (lease expired). SKIP LOCKED lets several relays
-- share one table without publishing a row twice at the same time.
UPDATE outbox o
SET status      = 'dispatching',
    lease_owner = @owner::text,
    lease_until = clock_timestamp() + make_interval(secs => @lease_seconds::float8),
    attempts    = o.attempts + 1
FROM (
    SELECT c.id
    FROM outbox c
    WHERE c.status IN ('pending', 'dispatching', 'failed')
      AND (c.status = 'pending'
        OR (c.status = 'failed' AND c.next_attempt_at <= clock_timestamp())
        OR (c.status = 'dispatching' AND c.lease_until < clock_timestamp() AND c.attempts < @max_attempts::int))
    ORDER BY c.id
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
) due
WHERE o.id = due.id
RETURNING o.id, o.event_type, o.payload, o.attempts, o.trace_context;

-- name: ListUnacknowledgedDue :many
-- ListUnacknowledgedDue is the catch-up's work: published rows still not acknowledged whose
-- message was last checked longer ago than the acknowledgment timeout, checked longest ago
-- first (outbox_checked_idx). The relay then looks at the message stored at each row's
-- sequence: only a row whose message the stream no longer holds is published again.
SELECT id, coalesce(stream_seq, 0)::bigint AS stream_seq
FROM outbox
WHERE status = 'dispatched'
  AND coalesce(checked_at, '-infinity'::timestamptz) < clock_timestamp() - make_interval(secs => @ack_timeout_seconds::float8)
ORDER BY coalesce(checked_at, '-infinity'::timestamptz)
LIMIT @batch_size;

-- name: MarkChecked :execrows
-- MarkChecked notes that the relay looked at these rows' messages (stored at the sequence that
-- was checked, or missing but published inside the broker's duplicate window, where a
-- re-publish would be dropped): catch-up looks at them again after the acknowledgment timeout.
-- It leaves status alone (the transition trigger does not run).
UPDATE outbox o
SET checked_at = clock_timestamp()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq) AS p
WHERE o.id = p.id
  AND o.status = 'dispatched'
  AND o.stream_seq = p.seq;

-- name: ClaimDispatched :many
-- ClaimDispatched takes published rows whose message the stream no longer holds, to publish
-- them again with the same message id: only rows still dispatched at the sequence that was
-- checked (a row published again meanwhile has another), and only those published longer ago
-- than the broker's duplicate window (inside it the broker would drop the re-publish as a
-- duplicate of the message it no longer holds) or before the stream was created (a stream made
-- anew, after the broker lost its store, never saw their ids). Rows locked in id order
-- (MarkDispatched).
UPDATE outbox o
SET status      = 'dispatching',
    lease_owner = @owner::text,
    lease_until = clock_timestamp() + make_interval(secs => @lease_seconds::float8)
FROM (
    SELECT c.id
    FROM outbox c
    JOIN (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq) AS p ON p.id = c.id
    WHERE c.status = 'dispatched'
      AND c.stream_seq = p.seq
      AND coalesce(c.dispatched_at, '-infinity'::timestamptz) <
          greatest(clock_timestamp() - make_interval(secs => @window_seconds::float8), @stream_created::timestamptz)
    ORDER BY c.id
    FOR UPDATE OF c SKIP LOCKED
) due
WHERE o.id = due.id
RETURNING o.id, o.event_type, o.payload, o.attempts, o.trace_context;

-- name: MarkDispatched :execrows
-- MarkDispatched, ReleaseOutbox and AcknowledgeOutbox lock their rows in id order (the
-- locked subquery) before they change them: the relay's marks and the acknowledgments of the
-- consuming service touch the same rows at once, and two statements locking them in orders of
-- their plans' choosing deadlocked each other until PostgreSQL's deadlock_timeout (1 s)
-- broke the tie.
-- dispatched_at is the time the relay had the broker's PubAck, which its mark may follow by up
-- to the relay's mark delay: the database's clock less the age of the PubAck as the relay
-- measured it, so that every time in the table is the database's.
UPDATE outbox o
SET status        = 'dispatched',
    dispatched_at = clock_timestamp() - make_interval(secs => p.age),
    checked_at    = clock_timestamp(),
    stream_seq    = p.seq,
    publish_count = o.publish_count + 1,
    broker_duplicates = o.broker_duplicates + p.dups,
    lease_owner   = NULL,
    lease_until   = NULL,
    last_error    = NULL
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq, unnest(@dups::int[]) AS dups,
             unnest(@ages::float8[]) AS age) AS p,
     (SELECT l.id FROM outbox l
      WHERE l.id = ANY (@ids::uuid[]) AND l.status = 'dispatching' AND l.lease_owner = @owner::text
      ORDER BY l.id
      FOR UPDATE) AS locked
WHERE o.id = p.id
  AND o.id = locked.id
  AND o.status = 'dispatching'
  AND o.lease_owner = @owner::text;

-- name: MarkFailed :execrows
-- MarkFailed records a refused publish: failed (retried at next_attempt_at) or, with the
-- attempts used up, dead_letter, and the attempt with its error in the row's bounded history.
UPDATE outbox
SET status          = CASE WHEN attempts >= @max_attempts::int THEN 'dead_letter' ELSE 'failed' END,
    last_error      = @last_error::text,
    attempt_history = outbox_history_push(attempt_history, jsonb_build_object(
        'attempt', attempts,
        'status', CASE WHEN attempts >= @max_attempts::int THEN 'dead_letter' ELSE 'failed' END,
        'error', left(@last_error::text, 500),
        'at', clock_timestamp())),
    next_attempt_at = @next_attempt_at::timestamptz,
    lease_owner     = NULL,
    lease_until     = NULL
WHERE id = @id
  AND status = 'dispatching'
  AND lease_owner = @owner::text;

-- name: ReleaseOutbox :execrows
-- ReleaseOutbox gives rows back without counting an attempt: the broker was unreachable, which
-- says nothing about the rows themselves. Rows locked in id order (MarkDispatched).
UPDATE outbox o
SET status      = CASE WHEN o.dispatched_at IS NULL THEN 'pending' ELSE 'dispatched' END,
    attempts    = CASE WHEN o.dispatched_at IS NULL THEN greatest(o.attempts - 1, 0) ELSE o.attempts END,
    lease_owner = NULL,
    lease_until = NULL
FROM (SELECT l.id FROM outbox l
      WHERE l.id = ANY (@ids::uuid[]) AND l.status = 'dispatching' AND l.lease_owner = @owner::text
      ORDER BY l.id
      FOR UPDATE) AS locked
WHERE o.id = locked.id
  AND o.status = 'dispatching'
  AND o.lease_owner = @owner::text;

-- name: DeadLetterAbandoned :execrows
UPDATE outbox
SET status      = 'dead_letter',
    last_error  = 'lease expired with the maximum attempts used',
    attempt_history = outbox_history_push(attempt_history, jsonb_build_object(
        'attempt', attempts, 'status', 'dead_letter',
        'error', 'lease expired with the maximum attempts used', 'at', clock_timestamp())),
    lease_owner = NULL,
    lease_until = NULL
WHERE status = 'dispatching'
  AND lease_until < clock_timestamp()
  AND attempts >= @max_attempts::int;

-- name: AcknowledgeOutbox :execrows
-- Rows locked in id order (MarkDispatched).
UPDATE outbox o
SET status          = 'acknowledged',
    acknowledged_at = clock_timestamp(),
    lease_owner     = NULL,
    lease_until     = NULL
FROM (SELECT l.id FROM outbox l
      WHERE l.id = ANY (@ids::uuid[]) AND l.status <> 'acknowledged'
      ORDER BY l.id
      FOR UPDATE) AS locked
WHERE o.id = locked.id
  AND o.status <> 'acknowledged';

-- name: AcknowledgePublished :execrows
-- AcknowledgePublished is AcknowledgeOutbox for the consumer that runs beside the rows' relay:
-- a row its relay published and holds unmarked (seq > 0: outbox.RelayConfig.MarkDelay) gets
-- the publish's details, as MarkDispatched would write them, in the update that acknowledges
-- it, so it is written once instead of twice. A row already marked, or claimed by another
-- relay since, keeps its own. Rows locked in id order (MarkDispatched).
UPDATE outbox o
SET status            = 'acknowledged',
    acknowledged_at   = clock_timestamp(),
    dispatched_at     = CASE WHEN p.held THEN clock_timestamp() - make_interval(secs => p.age) ELSE o.dispatched_at END,
    stream_seq        = CASE WHEN p.held THEN p.seq ELSE o.stream_seq END,
    publish_count     = CASE WHEN p.held THEN o.publish_count + 1 ELSE o.publish_count END,
    broker_duplicates = CASE WHEN p.held THEN o.broker_duplicates + p.dups ELSE o.broker_duplicates END,
    lease_owner       = NULL,
    lease_until       = NULL
FROM (SELECT u.id, u.seq, u.dups, u.age,
             u.seq > 0 AND r.status = 'dispatching' AND r.lease_owner = @owner::text AS held
      FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq, unnest(@dups::int[]) AS dups,
                   unnest(@ages::float8[]) AS age) AS u
      JOIN (SELECT l.id, l.status, l.lease_owner FROM outbox l
            WHERE l.id = ANY (@ids::uuid[]) AND l.status <> 'acknowledged'
            ORDER BY l.id
            FOR UPDATE) AS r ON r.id = u.id) AS p
WHERE o.id = p.id
  AND o.status <> 'acknowledged';

-- name: RecordPublishes :execrows
-- RecordPublishes writes a held publish's details on a row acknowledged before its relay
-- marked it, without them (by the consumer beside another wallet replica): once, on rows
-- that have none. It leaves status alone, so the transition guard, which keeps an
-- acknowledged row's status final, does not run.
UPDATE outbox o
SET dispatched_at     = clock_timestamp() - make_interval(secs => p.age),
    stream_seq        = p.seq,
    publish_count     = o.publish_count + 1,
    broker_duplicates = o.broker_duplicates + p.dups
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq, unnest(@dups::int[]) AS dups,
             unnest(@ages::float8[]) AS age) AS p
WHERE o.id = p.id
  AND o.status = 'acknowledged'
  AND o.dispatched_at IS NULL;

-- name: ListDispatchedUpTo :many
-- ListDispatchedUpTo lists published rows at or below a consuming service's ack floor and above
-- a sequence (the relay's cursor, which pages through rows it could not settle): the
-- candidates for acknowledgment once the message stored at each one's sequence is checked.
SELECT id, stream_seq::bigint AS stream_seq
FROM outbox
WHERE status = 'dispatched'
  AND stream_seq <= @ack_floor::bigint
  AND stream_seq > @after_seq::bigint
ORDER BY stream_seq
LIMIT @batch_size;

-- name: AcknowledgeDispatched :execrows
-- AcknowledgeDispatched acknowledges rows still dispatched at the sequence that was checked
-- (a row published again meanwhile has another sequence and is left alone).
UPDATE outbox o
SET status          = 'acknowledged',
    acknowledged_at = clock_timestamp()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq) AS p
WHERE o.id = p.id
  AND o.status = 'dispatched'
  AND o.stream_seq = p.seq;

-- name: DeleteAcknowledged :execrows
DELETE FROM outbox
WHERE id IN (
    SELECT d.id
    FROM outbox d
    WHERE d.status = 'acknowledged'
      AND d.acknowledged_at < @before::timestamptz
    ORDER BY d.acknowledged_at
    LIMIT @batch_size
);

-- name: GetOutbox :one
SELECT * FROM outbox WHERE id = @id;

-- name: ListOutbox :many
SELECT * FROM outbox
WHERE status = @status
ORDER BY id
LIMIT @row_limit;

-- name: OutboxStatusCounts :many
SELECT status, count(*)::bigint AS count
FROM outbox
GROUP BY status
ORDER BY status;

-- name: RequeueOutbox :many
-- RequeueOutbox and RequeueOutboxByStatus send rows back to pending with their attempts and last
-- error reset; the history keeps what they were, with the requeue and the attempts it reset.
UPDATE outbox
SET status = 'pending', attempts = 0, last_error = NULL, next_attempt_at = NULL,
    attempt_history = outbox_history_push(attempt_history, jsonb_build_object(
        'attempt', attempts, 'status', 'requeued', 'at', clock_timestamp()))
WHERE id = ANY (@ids::uuid[])
  AND status IN ('failed', 'dead_letter')
RETURNING id;

-- name: RequeueOutboxByStatus :many
UPDATE outbox
SET status = 'pending', attempts = 0, last_error = NULL, next_attempt_at = NULL,
    attempt_history = outbox_history_push(attempt_history, jsonb_build_object(
        'attempt', attempts, 'status', 'requeued', 'at', clock_timestamp()))
WHERE status = @status
  AND status IN ('failed', 'dead_letter')
RETURNING id;

-- name: ListenOutbox :exec
-- The outbox_notify trigger notifies this channel when a statement inserts pending rows.
LISTEN outbox;

-- name: ListOutboxAfter :many
-- ListOutboxAfter pages through the rows in some statuses in id order, for an operator's
-- reconcile that may change each row it passes.
SELECT * FROM outbox
WHERE status = ANY (@statuses::text[])
  AND id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: AllowOutboxRepublish :exec
-- AllowOutboxRepublish lets the rest of this transaction move acknowledged rows back to pending,
-- which the outbox_guard_transition trigger refuses otherwise (db/schema/events/00005): an
-- operator's republish (wallet outbox republish) runs it right before RepublishOutbox.
SELECT set_config('outbox.republish', 'on', true);

-- name: RepublishOutbox :execrows
-- RepublishOutbox sends the acknowledged rows created in [since, until) (until NULL: no upper
-- bound) back to pending, as new: the relay publishes them again under their own id, which is
-- the Nats-Msg-Id and the event id, so a lost stream is rebuilt and the consumers' inboxes
-- recognise the events they already applied. Needs AllowOutboxRepublish earlier in the same
-- transaction.
UPDATE outbox
SET status          = 'pending',
    attempts        = 0,
    last_error      = NULL,
    next_attempt_at = NULL,
    lease_owner     = NULL,
    lease_until     = NULL,
    dispatched_at   = NULL,
    acknowledged_at = NULL
WHERE status = 'acknowledged'
  AND created_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR created_at < sqlc.narg('until')::timestamptz);

-- name: NotifyOutboxRelays :exec
-- NotifyOutboxRelays wakes the relays listening on the outbox channel when the transaction
-- commits, as the insert trigger does for new pending rows.
SELECT pg_notify('outbox', '');

-- name: OutboxOpen :one
-- OutboxOpen counts the rows the relay still works on and the dead letters, and dates the
-- oldest waiting ones, for every metrics scrape and the status command: one pass over each
-- status's partial index (the relay's work index holds pending, dispatching and failed), never
-- the acknowledged rows that retention keeps. With a count of 0 a time is meaningless: the current time stands in for NULL.
WITH open AS (
    SELECT status, created_at FROM outbox WHERE status IN ('pending', 'dispatching', 'failed')
    UNION ALL SELECT status, created_at FROM outbox WHERE status = 'dispatched'
    UNION ALL SELECT status, created_at FROM outbox WHERE status = 'dead_letter'
)
SELECT
    count(*) FILTER (WHERE status = 'pending')::bigint     AS pending,
    count(*) FILTER (WHERE status = 'dispatching')::bigint AS dispatching,
    count(*) FILTER (WHERE status = 'dispatched')::bigint  AS dispatched,
    count(*) FILTER (WHERE status = 'failed')::bigint      AS failed,
    count(*) FILTER (WHERE status = 'dead_letter')::bigint AS dead_letter,
    coalesce(min(created_at) FILTER (WHERE status = 'pending'), clock_timestamp())::timestamptz AS oldest_pending,
    coalesce(min(created_at) FILTER (WHERE status <> 'dead_letter'), clock_timestamp())::timestamptz AS oldest_unacknowledged
FROM open;

-- name: RestoreOutboxBatch :many
-- RestoreOutboxBatch writes events again under their own ids, as new pending rows: an
-- operator's rebuild (wallet outbox rebuild) of the rows retention deleted, re-created from the
-- service's own tables. An id the outbox still holds is left alone (ON CONFLICT DO NOTHING);
-- the ids written come back. The insert trigger wakes the relays.
INSERT INTO outbox (id, event_type, aggregate_id, payload)
SELECT unnest(@ids::uuid[]), unnest(@event_types::text[]), unnest(@aggregate_ids::text[]), unnest(@payloads::jsonb[])
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: RepublishOutboxIDs :many
-- RepublishOutboxIDs is RepublishOutbox for the rows with these ids: those acknowledged go back
-- to pending, the others are left alone; the ids moved come back. Rows locked in id order
-- (MarkDispatched), which also keeps retention's DeleteAcknowledged from taking them meanwhile.
-- Needs AllowOutboxRepublish earlier in the same transaction.
UPDATE outbox o
SET status          = 'pending',
    attempts        = 0,
    last_error      = NULL,
    next_attempt_at = NULL,
    lease_owner     = NULL,
    lease_until     = NULL,
    dispatched_at   = NULL,
    acknowledged_at = NULL
FROM (SELECT l.id FROM outbox l
      WHERE l.id = ANY (@ids::uuid[]) AND l.status = 'acknowledged'
      ORDER BY l.id
      FOR UPDATE) AS locked
WHERE o.id = locked.id
  AND o.status = 'acknowledged'
RETURNING o.id;
