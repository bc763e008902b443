-- name: LastOutboxError :one
-- LastOutboxError is the newest publish error among the rows the broker refused, for status:
-- failed (retried after a backoff) and dead_letter (waiting for an operator). One branch per
-- status, so that each reads its partial index (outbox_work_idx, outbox_dead_letter_idx) and
-- never the acknowledged rows retention keeps. The status trigger sets updated_at when a
-- publish fails.
SELECT e.id, e.status, e.last_error::text AS last_error, e.updated_at
FROM (
    SELECT id, status, last_error, updated_at FROM outbox WHERE status = 'failed' AND last_error IS NOT NULL
    UNION ALL
    SELECT id, status, last_error, updated_at FROM outbox WHERE status = 'dead_letter' AND last_error IS NOT NULL
) AS e
ORDER BY e.updated_at DESC, e.id DESC
LIMIT 1;

-- name: LastInboxFailure :one
-- LastInboxFailure is the newest event recorded failed, with its reason word and error text, for
-- status (inbox_failed_idx).
SELECT id, event_type, reason::text AS reason, coalesce(detail, '')::text AS detail, updated_at
FROM inbox
WHERE status = 'failed'
ORDER BY updated_at DESC, id DESC
LIMIT 1;

-- name: EventsHealth :one
-- EventsHealth is the console header's verdict: the outbox's failed and dead_letter rows and
-- the inbox's failed and waiting rows, each counted up to @cap (a count of @cap reads "at
-- least"), each through its status's partial index (outbox_failed_idx, outbox_dead_letter_idx,
-- inbox_failed_idx, inbox_waiting_idx), so that a header costs a few index pages however large
-- the tables.
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE status = 'failed' LIMIT @cap::int) AS f)::bigint      AS outbox_failed,
    (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE status = 'dead_letter' LIMIT @cap::int) AS d)::bigint AS outbox_dead_letter,
    (SELECT count(*) FROM (SELECT 1 FROM inbox WHERE status = 'failed' LIMIT @cap::int) AS i)::bigint       AS inbox_failed,
    (SELECT count(*) FROM (SELECT 1 FROM inbox WHERE status = 'waiting' LIMIT @cap::int) AS w)::bigint      AS inbox_waiting;

-- name: InboxFailedCount :one
-- InboxFailedCount counts the inbox's failed events (its dead letters; a resolved one is no
-- longer failed) up to @cap, through inbox_failed_idx: what the metrics read at every scrape.
SELECT count(*)::bigint FROM (SELECT 1 FROM inbox WHERE status = 'failed' LIMIT @cap::int) AS f;
