-- Balance limits and forced reversals.
--
-- min_balance is the lowest a wallet's available balance (balance − held) may go: 0 by
-- default, below 0 for a credit line. A funding wallet (allow_negative) has no minimum, so its
-- min_balance stays 0 and is not read. max_balance is the highest its balance may go (NULL:
-- none).
--
-- A forced reversal (a chargeback) may take a wallet below its minimum, by at most its own
-- amount; forced_debit is the total those reversals took the wallet below its minimum, and
-- transfers.forced marks them. The floor CHECK keeps the database, not only the code, to
-- available ≥ min_balance − forced_debit: a wallet goes below its minimum only by force.

-- +goose Up
ALTER TABLE wallets
    ADD COLUMN min_balance  bigint NOT NULL DEFAULT 0,
    ADD COLUMN max_balance  bigint,
    ADD COLUMN forced_debit bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT wallets_min_balance_range CHECK (min_balance <= 0 AND min_balance >= -1000000000000000000),
    ADD CONSTRAINT wallets_min_balance_funding CHECK (NOT allow_negative OR min_balance = 0),
    ADD CONSTRAINT wallets_max_balance_range CHECK (max_balance >= 0),
    ADD CONSTRAINT wallets_forced_debit_nonnegative CHECK (forced_debit >= 0),
    ADD CONSTRAINT wallets_ceiling CHECK (max_balance IS NULL OR balance <= max_balance),
    ADD CONSTRAINT wallets_floor CHECK (allow_negative OR balance - held >= min_balance - forced_debit),
    DROP CONSTRAINT wallets_available_floor,
    DROP CONSTRAINT wallets_balance_floor;

ALTER TABLE transfers
    ADD COLUMN forced boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT transfers_forced_reversal CHECK (NOT forced OR reverses_transfer_id IS NOT NULL);

-- +goose Down
ALTER TABLE transfers
    DROP CONSTRAINT transfers_forced_reversal,
    DROP COLUMN forced;
ALTER TABLE wallets
    DROP CONSTRAINT wallets_floor,
    DROP CONSTRAINT wallets_ceiling,
    DROP CONSTRAINT wallets_forced_debit_nonnegative,
    DROP CONSTRAINT wallets_max_balance_range,
    DROP CONSTRAINT wallets_min_balance_funding,
    DROP CONSTRAINT wallets_min_balance_range,
    DROP COLUMN forced_debit,
    DROP COLUMN max_balance,
    DROP COLUMN min_balance,
    ADD CONSTRAINT wallets_balance_floor CHECK (allow_negative OR balance >= 0),
    ADD CONSTRAINT wallets_available_floor CHECK (allow_negative OR balance >= held);
