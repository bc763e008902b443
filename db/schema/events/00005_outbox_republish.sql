-- An operator may send acknowledged rows back to pending so that the relay publishes them again
-- (wallet outbox republish --since T): a stream that lost its history is rebuilt from the outbox,
-- under the same ids, which the consumers' inboxes recognise. acknowledged stays terminal for
-- everything else: the one way back is a transaction that says so first with
-- set_config('outbox.republish', 'on', true), which only the AllowOutboxRepublish query does.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = NEW.status AND OLD.status <> 'acknowledged' THEN
        NEW.updated_at := clock_timestamp();
        RETURN NEW;
    END IF;
    IF (OLD.status, NEW.status) IN (
        ('pending', 'dispatching'), ('pending', 'acknowledged'),
        ('dispatching', 'dispatched'), ('dispatching', 'failed'), ('dispatching', 'dead_letter'),
        ('dispatching', 'pending'), ('dispatching', 'acknowledged'),
        ('dispatched', 'dispatching'), ('dispatched', 'acknowledged'),
        ('failed', 'dispatching'), ('failed', 'dead_letter'), ('failed', 'pending'), ('failed', 'acknowledged'),
        ('dead_letter', 'pending'), ('dead_letter', 'acknowledged')
    ) OR (OLD.status = 'acknowledged' AND NEW.status = 'pending'
          AND current_setting('outbox.republish', true) = 'on') THEN
        NEW.updated_at := clock_timestamp();
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox %: illegal status transition % -> %', OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = NEW.status AND OLD.status <> 'acknowledged' THEN
        NEW.updated_at := clock_timestamp();
        RETURN NEW;
    END IF;
    IF (OLD.status, NEW.status) IN (
        ('pending', 'dispatching'), ('pending', 'acknowledged'),
        ('dispatching', 'dispatched'), ('dispatching', 'failed'), ('dispatching', 'dead_letter'),
        ('dispatching', 'pending'), ('dispatching', 'acknowledged'),
        ('dispatched', 'dispatching'), ('dispatched', 'acknowledged'),
        ('failed', 'dispatching'), ('failed', 'dead_letter'), ('failed', 'pending'), ('failed', 'acknowledged'),
        ('dead_letter', 'pending'), ('dead_letter', 'acknowledged')
    ) THEN
        NEW.updated_at := clock_timestamp();
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox %: illegal status transition % -> %', OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END;
$$;
-- +goose StatementEnd
