-- Holds: a hold reserves part of a wallet's balance until it is captured (the
-- captured amount then moves as an ordinary transfer, with its own TransferCompleted entry) or
-- voided (by request or expiry). The GL shows what is reserved on account 2020: HoldPlaced.v1
-- moves the amount from 2010 to 2020, HoldCaptured.v1 and HoldVoided.v1 move the whole held
-- amount back (the release). Per currency, 2020's balance is the total of the open holds.
--
-- A hold's entries carry its id (hold_id) and a movement key in transfer_id that no transfer
-- uuid can take: 'hold:<id>:placed' and 'hold:<id>:released'. UNIQUE (transfer_id) then gives
-- each hold at most one placement and one release, whichever event (capture or void) releases
-- it; the CHECK ties the key to the hold and keeps plain transfers out of the 'hold:' keys.

-- +goose Up
INSERT INTO accounts (code, name, type, normal_balance) VALUES
    ('2020', 'Funds on hold for wallets', 'liability', 'credit')
ON CONFLICT (code) DO NOTHING;

ALTER TABLE journal_entries ADD COLUMN hold_id text;

ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_hold_key CHECK (
    CASE WHEN hold_id IS NULL THEN transfer_id NOT LIKE 'hold:%'
         ELSE hold_id <> '' AND transfer_id IN ('hold:' || hold_id || ':placed', 'hold:' || hold_id || ':released')
    END
);

CREATE INDEX journal_entries_hold_id_idx ON journal_entries (hold_id) WHERE hold_id IS NOT NULL;

-- +goose Down
DROP INDEX journal_entries_hold_id_idx;
ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_hold_key;
ALTER TABLE journal_entries DROP COLUMN hold_id;
DELETE FROM accounts WHERE code = '2020' AND NOT EXISTS (SELECT 1 FROM journal_lines WHERE account_code = '2020');
