-- The outbox and inbox tables of internal/events. Both services apply this set to their own
-- database (goose table goose_events_version): the wallet publishes TransferCompleted.v1 and
-- consumes TransferPosted.v1, the GL the other way round.

-- +goose Up
CREATE TABLE outbox (
    id              uuid PRIMARY KEY,
    event_type      text        NOT NULL,
    aggregate_id    text        NOT NULL,
    payload         jsonb       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'dispatching', 'dispatched', 'acknowledged', 'failed', 'dead_letter')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    publish_count   integer     NOT NULL DEFAULT 0,
    last_error      text,
    next_attempt_at timestamptz,
    lease_owner     text,
    lease_until     timestamptz,
    stream_seq      bigint,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    dispatched_at   timestamptz,
    acknowledged_at timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (status <> 'dispatching' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK (status <> 'acknowledged' OR acknowledged_at IS NOT NULL)
);

-- The relay's work set: small because terminal rows are excluded.
CREATE INDEX outbox_work_idx ON outbox (id) WHERE status IN ('pending', 'dispatching', 'failed');
-- Catch-up: rows published but not yet acknowledged.
CREATE INDEX outbox_dispatched_idx ON outbox (dispatched_at) WHERE status = 'dispatched';
-- Operators: rows that need a human.
CREATE INDEX outbox_dead_letter_idx ON outbox (id) WHERE status = 'dead_letter';
-- Retention: acknowledged rows, oldest first.
CREATE INDEX outbox_acknowledged_idx ON outbox (acknowledged_at) WHERE status = 'acknowledged';
CREATE INDEX outbox_aggregate_idx ON outbox (aggregate_id);

-- Rows only move forward along the seed's status machine; an operator's requeue is the one way
-- back (failed or dead_letter -> pending), and a relay may release its own claim.
-- +goose StatementBegin
CREATE FUNCTION outbox_guard_transition() RETURNS trigger
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

CREATE TRIGGER outbox_guard_transition
    BEFORE UPDATE OF status ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_guard_transition();

-- Wakes relays within milliseconds of a commit (LISTEN outbox); polling is the fallback.
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger
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

CREATE TABLE inbox (
    id                text PRIMARY KEY,
    consumer          text        NOT NULL,
    event_id          text        NOT NULL,
    event_type        text        NOT NULL,
    status            text        NOT NULL
        CHECK (status IN ('processing', 'processed', 'failed', 'duplicate')),
    attempts          integer     NOT NULL DEFAULT 1,
    duplicates        integer     NOT NULL DEFAULT 0,
    stream_seq        bigint,
    reason            text,
    payload           bytea,
    received_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    processed_at      timestamptz,
    last_duplicate_at timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (status <> 'failed' OR reason IS NOT NULL)
);

CREATE INDEX inbox_failed_idx ON inbox (received_at) WHERE status = 'failed';
CREATE INDEX inbox_event_idx ON inbox (event_id);

-- +goose Down
DROP TABLE inbox;
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
DROP TRIGGER outbox_guard_transition ON outbox;
DROP FUNCTION outbox_guard_transition();
DROP TABLE outbox;
