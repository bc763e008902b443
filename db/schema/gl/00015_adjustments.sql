-- Manual adjustments: an accountant corrects the books with one balanced journal entry posted
-- through the GL's API (POST /v1/adjustments), never with SQL. An adjustment is no event of the
-- wallet: its entry carries event_type 'Adjustment.v1', kind 'adjustment' and the movement key
-- 'adjustment:<adjustment id>' in both transfer_id and event_id, a key no transfer, reversal or
-- hold can take (the CHECK below; UNIQUE (transfer_id) then gives an adjustment one entry).
--
-- The adjustments table holds what the entry alone cannot: the reason, the client's
-- Idempotency-Key with the fingerprint of its request (the same key with another body is
-- refused, the same body answered with the first entry again), and the API key that made it.
-- The row is written first in the transaction, so that a second request with the same key waits
-- on the unique index and then answers from the first; its entry follows in the same
-- transaction, which is why the foreign key to the entry is checked at commit. Like the
-- journal, it is append-only. gl verify checks the link both ways (every adjustment entry has
-- its row, every row its adjustment entry).

-- +goose Up
ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_adjustment_key CHECK (
    CASE WHEN kind = 'adjustment'
         THEN event_type = 'Adjustment.v1' AND transfer_id LIKE 'adjustment:%' AND event_id = transfer_id
              AND hold_id IS NULL AND reverses_entry_id IS NULL
         ELSE event_type <> 'Adjustment.v1' AND transfer_id NOT LIKE 'adjustment:%'
    END
);

CREATE TABLE adjustments (
    id              uuid PRIMARY KEY,
    entry_id        uuid        NOT NULL UNIQUE REFERENCES journal_entries (id) DEFERRABLE INITIALLY DEFERRED,
    idempotency_key text        NOT NULL CHECK (idempotency_key ~ '^[ -~]{1,255}$'),
    request_hash    bytea       NOT NULL CHECK (length(request_hash) = 32),
    reason          text        NOT NULL CHECK (btrim(reason) <> '' AND length(reason) <= 500),
    created_by_key  uuid        NOT NULL REFERENCES api_keys (id),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT adjustments_idempotency_key_key UNIQUE (idempotency_key)
);

CREATE TRIGGER adjustments_append_only
    BEFORE UPDATE OR DELETE ON adjustments
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();

-- +goose Down
DROP TABLE adjustments;
ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_adjustment_key;
