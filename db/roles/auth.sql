-- API keys and the audit trail (internal/auth, db/queries/auth), in both services.

-- Keys are written by the owner (keys create and keys revoke run with the migrate URL): the
-- runtime role only looks a request's key up and records when it was last used. A service whose
-- role could INSERT or UPDATE api_keys could give any key admin, or make itself one.
GRANT SELECT ON api_keys TO :"runtime_role";
GRANT UPDATE (last_used_at) ON api_keys TO :"runtime_role";

-- The audit trail is append-only: a trigger refuses UPDATE, DELETE and TRUNCATE even to the owner,
-- and the runtime role is not even allowed to try. The runtime role appends the API's
-- administrative actions and the operator commands that run as it; the owner appends keys create
-- and keys revoke.
-- Its id is an identity column, which takes its value without USAGE on the sequence.
GRANT SELECT, INSERT ON audit_log TO :"runtime_role";
