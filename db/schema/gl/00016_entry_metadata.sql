-- A journal entry's metadata: the client's key-value pairs of the transfer it posts, as its
-- TransferCompleted.v2 event carried them (internal/metadata), {} when none. GET /v1/entries
-- filters on them by containment (@>), which the GIN index answers; jsonb_path_ops indexes
-- exactly that operator. Only entries with metadata are indexed: a filter names at least one
-- pair, and the many entries without any would each be an "empty item" every search reads
-- while they wait in the index's pending list.

-- +goose Up
ALTER TABLE journal_entries ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT journal_entries_metadata_strings CHECK (
        jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")'));
CREATE INDEX journal_entries_metadata_idx ON journal_entries USING gin (metadata jsonb_path_ops) WHERE metadata <> '{}';

-- +goose Down
DROP INDEX journal_entries_metadata_idx;
ALTER TABLE journal_entries DROP COLUMN metadata;
