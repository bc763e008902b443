-- Posting rules per currency: a rule may name the currency of the events it posts; '' is the
-- rule for any currency. An event is posted by the rule of its type, kind and currency in force
-- at its time, and by the any-currency rule when no rule of its currency is in force then
-- (gl.Rules.At). The currency is part of the key, so a currency's rules are dated apart from the
-- others'.

-- +goose Up
ALTER TABLE posting_rules
    ADD COLUMN currency text NOT NULL DEFAULT ''
        CONSTRAINT posting_rules_currency_code CHECK (currency = '' OR currency ~ '^[A-Z]{3}$');
ALTER TABLE posting_rules DROP CONSTRAINT posting_rules_pkey;
ALTER TABLE posting_rules ADD PRIMARY KEY (event_type, kind, currency, effective_from);

-- +goose Down
ALTER TABLE posting_rules DISABLE TRIGGER USER;
DELETE FROM posting_rules WHERE currency <> '';
ALTER TABLE posting_rules ENABLE TRIGGER USER;
ALTER TABLE posting_rules DROP CONSTRAINT posting_rules_pkey;
ALTER TABLE posting_rules ADD PRIMARY KEY (event_type, kind, effective_from);
ALTER TABLE posting_rules DROP COLUMN currency;
