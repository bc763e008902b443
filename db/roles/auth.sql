-- API keys and the audit trail (internal/auth, db/queries/auth), in both services.

-- Keys are created (keys create), looked up, touched (last_used_at) and revoked, never deleted.
GRANT SELECT, INSERT, UPDATE ON api_keys TO :"runtime_role";

-- The audit trail is append-only: a trigger refuses UPDATE, DELETE and TRUNCATE even to the owner,
-- and the runtime role is not even allowed to try.
-- Its id is an identity column, which takes its value without USAGE on the sequence.
GRANT SELECT, INSERT ON audit_log TO :"runtime_role";
