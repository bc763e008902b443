-- Reversals: the entry of a reversal swaps its original's lines (debit <-> credit,
-- the reversed amount) and names the entry it reverses. The journal stays append-only: the
-- link is written once, on the reversal's entry; the original's reversals are found through
-- the index.

-- +goose Up
ALTER TABLE journal_entries ADD COLUMN reverses_entry_id uuid REFERENCES journal_entries (id);

CREATE INDEX journal_entries_reverses_entry_id_idx ON journal_entries (reverses_entry_id)
    WHERE reverses_entry_id IS NOT NULL;

-- +goose Down
DROP INDEX journal_entries_reverses_entry_id_idx;
ALTER TABLE journal_entries DROP COLUMN reverses_entry_id;
