-- An operator may resolve a failed inbox event that no retry can apply (malformed, conflict,
-- unauthenticated, or any failure they decide to close): its row becomes 'resolved', keeps its
-- reason, detail and payload for the record, and says who closed it, when and why:
--   resolved_at   when it was resolved
--   resolved_by   the API key (or console session's key) that resolved it
--   resolution    the operator's reason, required
-- A resolved event is done: a redelivery of it is absorbed as a duplicate, never applied, and a
-- new failure of the same event never reopens it. Readiness and the failed counts leave it out.

-- +goose Up
ALTER TABLE inbox ADD COLUMN resolved_at timestamptz;
ALTER TABLE inbox ADD COLUMN resolved_by text;
ALTER TABLE inbox ADD COLUMN resolution text;
ALTER TABLE inbox DROP CONSTRAINT inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check
    CHECK (status IN ('processing', 'processed', 'failed', 'duplicate', 'waiting', 'resolved'));
ALTER TABLE inbox ADD CONSTRAINT inbox_resolved_has_resolution
    CHECK (status <> 'resolved' OR (resolved_at IS NOT NULL AND resolved_by IS NOT NULL
                                    AND reason IS NOT NULL AND btrim(coalesce(resolution, '')) <> ''));

-- +goose Down
UPDATE inbox SET status = 'failed' WHERE status = 'resolved';
ALTER TABLE inbox DROP CONSTRAINT inbox_resolved_has_resolution;
ALTER TABLE inbox DROP CONSTRAINT inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check
    CHECK (status IN ('processing', 'processed', 'failed', 'duplicate', 'waiting'));
ALTER TABLE inbox DROP COLUMN resolution;
ALTER TABLE inbox DROP COLUMN resolved_by;
ALTER TABLE inbox DROP COLUMN resolved_at;
