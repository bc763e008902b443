-- An outbox row keeps the story of its failed publishes in attempt_history, oldest first: one
-- entry per refused publish ({"attempt", "status", "error", "at"}, status the one the failure
-- moved it to: failed or dead_letter) and one per operator's requeue ({"attempt", "status":
-- "requeued", "at"}, attempt the attempts it had used). A requeue resets attempts and
-- last_error but never the history, so an incident stays readable after the row is
-- acknowledged. Bounded: the newest 20 entries (outbox_history_push), each error clipped to 500
-- characters; it lives in the row and is deleted with it (outbox retention).
--
-- outbox_unacknowledged_idx holds every row not acknowledged, in id order: the operator
-- console's default outbox page reads it a page at a time, never the acknowledged rows that
-- retention keeps. outbox_failed_idx holds the failed rows alone, which the console's header
-- counts (the relay's work index holds them among every pending row). Both are built
-- CONCURRENTLY (outside a transaction): on a large outbox a plain build would hold the relays'
-- claims for as long. A build that fails leaves an INVALID index: drop it (DROP INDEX
-- CONCURRENTLY outbox_unacknowledged_idx / outbox_failed_idx) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS attempt_history jsonb NOT NULL DEFAULT '[]'::jsonb;
COMMENT ON COLUMN outbox.attempt_history IS 'the newest 20 failed publishes and requeues, oldest first; kept across requeues';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_history_push(history jsonb, entry jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_agg(kept.e ORDER BY kept.n), '[]'::jsonb)
    FROM (SELECT h.e, h.n
          FROM jsonb_array_elements(coalesce(history, '[]'::jsonb) || jsonb_build_array(entry)) WITH ORDINALITY AS h(e, n)
          ORDER BY h.n DESC
          LIMIT 20) AS kept
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_unacknowledged_idx ON outbox (id) WHERE status <> 'acknowledged';
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_failed_idx ON outbox (id) WHERE status = 'failed';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_failed_idx;
DROP INDEX CONCURRENTLY IF EXISTS outbox_unacknowledged_idx;
DROP FUNCTION IF EXISTS outbox_history_push(jsonb, jsonb);
ALTER TABLE outbox DROP COLUMN IF EXISTS attempt_history;
