-- API keys and the audit trail of internal/auth. Both services apply this set to their own
-- database (goose table goose_auth_version): each service has its own keys and its own audit.

-- +goose Up
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    name         text        NOT NULL CHECK (name ~ '^[A-Za-z0-9._-]{1,64}$'),
    -- SHA-256 of the secret: the secret itself (32 random bytes) is shown once and never stored.
    secret_hash  bytea       NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    scopes       text[]      NOT NULL CHECK (cardinality(scopes) > 0),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- Every administrative action, by whom (the key, or NULL for an operator's command run with the
-- database's credentials), on what. Rows are never changed or removed.
CREATE TABLE audit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    key_id  uuid REFERENCES api_keys (id),
    actor   text        NOT NULL, -- the key's name, or "cli:<os user>" for a command
    action  text        NOT NULL,
    target  text        NOT NULL DEFAULT '',
    detail  jsonb
);

CREATE INDEX audit_log_at_idx ON audit_log (at, id);

-- +goose StatementBegin
CREATE FUNCTION audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- +goose Down
DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
DROP TABLE api_keys;
