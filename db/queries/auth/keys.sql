-- name: InsertKey :one
INSERT INTO api_keys (id, name, secret_hash, scopes, owner)
VALUES (@id, @name, @secret_hash, @scopes::text[], sqlc.narg('owner')::text)
RETURNING *;

-- name: KeyBySecretHash :one
-- The key a request's secret names; revoked keys are returned too, so that a revoked key is told
-- apart from an unknown one in the log (both are 401 to the client).
SELECT * FROM api_keys WHERE secret_hash = @secret_hash;

-- name: ListKeys :many
SELECT * FROM api_keys ORDER BY created_at, id;

-- name: RevokeKey :one
UPDATE api_keys SET revoked_at = coalesce(revoked_at, clock_timestamp())
WHERE id = @id
RETURNING *;

-- name: TouchKeys :exec
-- TouchKeys records when keys were last used (batched: at most once a minute per key).
UPDATE api_keys k SET last_used_at = u.at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@ats::timestamptz[]) AS at) AS u
WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at);

-- name: InsertAudit :exec
INSERT INTO audit_log (key_id, actor, action, target, detail)
VALUES (sqlc.narg('key_id')::uuid, @actor, @action, @target, @detail);

-- name: ListAudit :many
SELECT * FROM audit_log
WHERE id > @after_id
ORDER BY id
LIMIT @row_limit;
