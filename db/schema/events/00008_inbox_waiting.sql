-- An event that needs another one applied first (a reversal whose transfer is not posted, a
-- hold's release whose placement is not) is parked in the inbox instead of being redelivered:
-- its row is 'waiting', waits_for names what it waits for ("transfer:<id>", "hold:<id>"), and
-- payload holds the verified message, which the consumer applies once that posts. The broker
-- has the message acknowledged, so a wait holds none of its ack-pending slots.
-- An operator may give up on a waiting event: it is then failed with the reason word
--   abandoned        it waited for an event that an operator says will never come

-- +goose Up
ALTER TABLE inbox ADD COLUMN waits_for text;
ALTER TABLE inbox DROP CONSTRAINT inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check
    CHECK (status IN ('processing', 'processed', 'failed', 'duplicate', 'waiting'));
ALTER TABLE inbox ADD CONSTRAINT inbox_waiting_has_waits_for
    CHECK (status <> 'waiting' OR (waits_for IS NOT NULL AND payload IS NOT NULL));
ALTER TABLE inbox DROP CONSTRAINT inbox_reason_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_reason_check
    CHECK (reason IN ('malformed', 'conflict', 'exhausted', 'unauthenticated', 'abandoned'));
-- The consumer's work set after each commit and on its tick: small, as only waiting rows are in it.
CREATE INDEX inbox_waiting_idx ON inbox (waits_for) WHERE status = 'waiting';

-- +goose Down
DROP INDEX inbox_waiting_idx;
UPDATE inbox
SET status = 'failed', reason = 'exhausted', detail = coalesce(detail, 'waited for ' || waits_for)
WHERE status = 'waiting';
UPDATE inbox SET reason = 'exhausted' WHERE reason = 'abandoned';
ALTER TABLE inbox DROP CONSTRAINT inbox_reason_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_reason_check
    CHECK (reason IN ('malformed', 'conflict', 'exhausted', 'unauthenticated'));
ALTER TABLE inbox DROP CONSTRAINT inbox_waiting_has_waits_for;
ALTER TABLE inbox DROP CONSTRAINT inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check
    CHECK (status IN ('processing', 'processed', 'failed', 'duplicate'));
ALTER TABLE inbox DROP COLUMN waits_for;
