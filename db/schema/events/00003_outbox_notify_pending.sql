-- Relays that publish on commit insert their rows already claimed ('dispatching'): waking every
-- relay for them would only cost each an empty claim. The trigger now notifies when a statement
-- inserted at least one 'pending' row, which is what a woken relay can claim.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted WHERE status = 'pending') THEN
        PERFORM pg_notify('outbox', '');
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
