-- A failed inbox row says why in two parts: reason, one stable word that operators, alerts and
-- scripts match on, and detail, the error's text. The words:
--   malformed        the event can never be decoded or applied as it is
--   conflict         it contradicts what was already applied (e.g. a transfer posted before
--                    with another amount, currency or wallets)
--   exhausted        its handler ran and failed on EVENTS_MAX_DELIVER deliveries
--   unauthenticated  its producer could not be verified

-- +goose Up
ALTER TABLE inbox RENAME COLUMN reason TO detail;
ALTER TABLE inbox ADD COLUMN reason text
    CHECK (reason IN ('malformed', 'conflict', 'exhausted', 'unauthenticated'));
UPDATE inbox
SET reason = CASE WHEN detail LIKE '%gave up%' THEN 'exhausted' ELSE 'malformed' END
WHERE detail IS NOT NULL;
ALTER TABLE inbox ADD CONSTRAINT inbox_failed_has_reason CHECK (status <> 'failed' OR reason IS NOT NULL);

-- +goose Down
ALTER TABLE inbox DROP CONSTRAINT inbox_failed_has_reason;
ALTER TABLE inbox DROP COLUMN reason;
ALTER TABLE inbox RENAME COLUMN detail TO reason;
