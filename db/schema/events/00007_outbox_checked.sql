-- The stream is a bounded transport and the outbox the record: a published row is published
-- again only when the stream no longer holds its message (aged out, pushed out, purged, lost
-- with the broker's store), never merely because its acknowledgment is late. checked_at is when
-- the relay last published the row or saw its message stored at stream_seq; catch-up looks at
-- the rows checked longest ago (once per EVENTS_ACK_TIMEOUT at most), so a row waiting for a
-- consumer that is away costs one look-up per interval, not one stored copy per interval.
-- Every time here is the database's (clock_timestamp()): the relay's host clock is compared
-- with nothing. A dispatched row never checked (NULL: written before this column, or by hand)
-- is due at once.

-- +goose Up
ALTER TABLE outbox ADD COLUMN checked_at timestamptz;
DROP INDEX outbox_dispatched_idx;
CREATE INDEX outbox_checked_idx ON outbox ((coalesce(checked_at, '-infinity'::timestamptz))) WHERE status = 'dispatched';
COMMENT ON COLUMN outbox.checked_at IS 'when the relay last published the row or saw its message stored at stream_seq';

-- +goose Down
DROP INDEX outbox_checked_idx;
CREATE INDEX outbox_dispatched_idx ON outbox (dispatched_at) WHERE status = 'dispatched';
ALTER TABLE outbox DROP COLUMN checked_at;
