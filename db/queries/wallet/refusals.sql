-- name: GetRefusal :one
-- The refusal kept under a key, unless it expired.
SELECT * FROM refusals
WHERE key_space = @key_space AND idempotency_owner = @idempotency_owner AND idempotency_key = @idempotency_key
  AND expires_at > clock_timestamp();

-- name: GetRefusals :many
-- The refusals kept under the keys of a batch of transfers, unless they expired.
SELECT r.* FROM refusals r
JOIN (SELECT unnest(@idempotency_owners::text[]) AS owner, unnest(@idempotency_keys::text[]) AS key) AS k
  ON r.idempotency_owner = k.owner AND r.idempotency_key = k.key
WHERE r.key_space = 'transfer' AND r.expires_at > clock_timestamp();

-- name: InsertRefusal :execrows
-- InsertRefusal keeps a refusal under its key, under the key's exclusive lock (LockKey); an
-- expired refusal of the key is replaced, a live one stays (no row).
INSERT INTO refusals (key_space, idempotency_owner, idempotency_key, request_hash, problem_type, detail, expires_at)
VALUES (@key_space, @idempotency_owner, @idempotency_key, @request_hash, @problem_type, @detail, @expires_at)
ON CONFLICT (key_space, idempotency_owner, idempotency_key) DO UPDATE
SET request_hash = excluded.request_hash, problem_type = excluded.problem_type, detail = excluded.detail,
    created_at = clock_timestamp(), expires_at = excluded.expires_at
WHERE refusals.expires_at <= clock_timestamp();

-- name: DeleteExpiredRefusals :execrows
-- A few expired refusals at a time, removed by each new one: the table's bound.
DELETE FROM refusals
WHERE ctid = ANY (ARRAY(SELECT ctid FROM refusals WHERE expires_at <= clock_timestamp()
                        ORDER BY expires_at LIMIT @row_limit));

-- name: LockKeysShared :exec
-- A request that claimed keys locks them shared until it commits, then looks for their
-- refusals (in a statement of its own, which sees what committed while it waited): a refusal is
-- recorded under the key's exclusive lock (LockKey), so the two never miss each other.
SELECT pg_advisory_xact_lock_shared(hashtextextended(@key_space::text || ':' || k.owner || ':' || k.key, 0))
FROM (SELECT unnest(@idempotency_owners::text[]) AS owner, unnest(@idempotency_keys::text[]) AS key) AS k;

-- name: LockKey :exec
-- The exclusive lock of a key under which its refusal is recorded, once no claim of it is in
-- flight (LockKeysShared).
SELECT pg_advisory_xact_lock(hashtextextended(@key_space::text || ':' || @idempotency_owner::text || ':' || @idempotency_key::text, 0));
