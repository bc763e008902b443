-- Metadata on wallets and holds: the client's key-value pairs (internal/metadata), a JSON
-- object of strings, {} when none were given, as on transfers (00014). A hold's ride on its
-- HoldPlaced.v1 event to the GL's placement entry, and its capture's transfer copies them; a
-- wallet's stay in the wallet (no wallet event exists). The listings' filters
-- (GET /v1/wallets?metadata[k]=v, GET /v1/holds?metadata[k]=v) are containments (@>), which
-- the partial GIN indexes answer, as transfers_metadata_idx does.
--
-- GET /v1/wallets pages newest first by (created_at, id): wallets_created_at_idx walks that
-- order backwards and stops at the page's end.

-- +goose Up
ALTER TABLE wallets ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT wallets_metadata_strings CHECK (
        jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")'));
CREATE INDEX wallets_metadata_idx ON wallets USING gin (metadata jsonb_path_ops) WHERE metadata <> '{}';
CREATE INDEX wallets_created_at_idx ON wallets (created_at, id);

ALTER TABLE holds ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT holds_metadata_strings CHECK (
        jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")'));
CREATE INDEX holds_metadata_idx ON holds USING gin (metadata jsonb_path_ops) WHERE metadata <> '{}';

-- +goose Down
DROP INDEX holds_metadata_idx;
ALTER TABLE holds DROP COLUMN metadata;
DROP INDEX wallets_created_at_idx;
DROP INDEX wallets_metadata_idx;
ALTER TABLE wallets DROP COLUMN metadata;
