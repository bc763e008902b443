-- A transfer's metadata: the client's key-value pairs (internal/metadata), a JSON object of
-- strings, {} when none were given; carried by its TransferCompleted.v2 event to the GL. The
-- listing's filter (GET /v1/transfers?metadata[k]=v) is a containment (@>), which the GIN
-- index answers; jsonb_path_ops indexes exactly that operator, in a smaller index. Only
-- transfers with metadata are indexed: a filter names at least one pair, and the many
-- transfers without any would each be an "empty item" every search reads while they wait in
-- the index's pending list (and cost the batch's insert a GIN entry).

-- +goose Up
ALTER TABLE transfers ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT transfers_metadata_strings CHECK (
        jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")'));
CREATE INDEX transfers_metadata_idx ON transfers USING gin (metadata jsonb_path_ops) WHERE metadata <> '{}';

-- +goose Down
DROP INDEX transfers_metadata_idx;
ALTER TABLE transfers DROP COLUMN metadata;
