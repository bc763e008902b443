-- Indexes of the transfer listing's filters (GET /v1/transfers?wallet_id=, ?reference=): each
-- is a range scan in listing order that stops at the page's end, however many transfers there
-- are. A wallet's transfers are those from it and those to it, one index each; a reference
-- indexes only the transfers that have one.

-- +goose Up
CREATE INDEX transfers_from_wallet_idx ON transfers (from_wallet_id, created_at, id);
CREATE INDEX transfers_to_wallet_idx ON transfers (to_wallet_id, created_at, id);
CREATE INDEX transfers_reference_idx ON transfers (reference, created_at, id) WHERE reference <> '';

-- +goose Down
DROP INDEX transfers_reference_idx;
DROP INDEX transfers_to_wallet_idx;
DROP INDEX transfers_from_wallet_idx;
