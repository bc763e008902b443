-- A transfer's reference (issue 17): the payer's free text, optional (empty when not given),
-- carried by its TransferCompleted.v2 event to the GL. The transfer's kind is not stored: it
-- follows from its wallets' allow_negative flags, which never change, and the event carries it.

-- +goose Up
ALTER TABLE transfers ADD COLUMN reference text NOT NULL DEFAULT ''
    CONSTRAINT transfers_reference_length CHECK (char_length(reference) <= 140);

-- +goose Down
ALTER TABLE transfers DROP COLUMN reference;
