package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/auth/internal/authdb"
	"walletgl/internal/database"
)

// ErrKeyNotFound says no key has that id.
var ErrKeyNotFound = errors.New("no such API key")

// ErrUnavailable says the key store's database cannot be reached.
var ErrUnavailable = errors.New("key store unavailable")

// Keys is a service's API keys and audit trail, in its database.
type Keys struct {
	pool  *pgxpool.Pool
	q     *authdb.Queries
	known []Scope

	mu      sync.Mutex
	cache   map[string]cached       // by secret hash: keys a recent lookup found
	unknown map[string]time.Time    // by secret hash: when a lookup found no key
	used    map[uuid.UUID]time.Time // last use of each key not yet written
	lookups int                     // database lookups made, for tests
}

// cacheTTL is how long an authentication is trusted without the database: a revoked key is
// refused within this time in every process.
const cacheTTL = 2 * time.Second

// cacheLimit bounds the cache of keys found; past it, it starts afresh. Unknown secrets are
// cached apart (unknownLimit), so that any number of them never evicts a known key.
const (
	cacheLimit   = 10000
	unknownLimit = 10000
)

type cached struct {
	principal Principal
	valid     bool
	at        time.Time
}

// NewKeys returns the keys in the database behind pool; known are the service's scopes.
func NewKeys(pool *pgxpool.Pool, known []Scope) *Keys {
	return &Keys{pool: pool, q: authdb.New(pool), known: known, cache: map[string]cached{}, unknown: map[string]time.Time{}, used: map[uuid.UUID]time.Time{}}
}

// Scopes are the scopes this service knows.
func (k *Keys) Scopes() []Scope { return k.known }

// Create makes a key with name and scopes and returns it with its secret, which is shown this
// once: only its hash is kept. The creation is audited as done by actor.
func (k *Keys) Create(ctx context.Context, actor Actor, name string, scopes []Scope) (Key, string, error) {
	return k.CreateOwned(ctx, actor, name, "", scopes)
}

// CreateOwned makes a key as Create does, acting for owner ("" for the platform).
func (k *Keys) CreateOwned(ctx context.Context, actor Actor, name, owner string, scopes []Scope) (Key, string, error) {
	var ownerCol *string
	if owner != "" {
		if err := ValidateOwner(owner); err != nil {
			return Key{}, "", err
		}
		ownerCol = &owner
	}
	secret, err := newSecret()
	if err != nil {
		return Key{}, "", err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Key{}, "", fmt.Errorf("new key id: %w", err)
	}
	raw := make([]string, len(scopes))
	for i, s := range scopes {
		raw[i] = string(s)
	}
	row, err := database.WithTxV(ctx, k.pool, func(tx pgx.Tx) (authdb.ApiKey, error) {
		row, err := k.q.WithTx(tx).InsertKey(ctx, authdb.InsertKeyParams{ID: id, Name: name, SecretHash: hashSecret(secret), Scopes: raw, Owner: ownerCol})
		if err != nil {
			return row, err
		}
		return row, audit(ctx, k.q.WithTx(tx), actor, "key.create", id.String(), map[string]any{"name": name, "scopes": raw, "owner": ownerCol})
	})
	if err != nil {
		return Key{}, "", k.interpret(fmt.Errorf("create key %s: %w", name, err))
	}
	return toKey(row), secret, nil
}

// List returns every key, revoked ones included, oldest first.
func (k *Keys) List(ctx context.Context) ([]Key, error) {
	rows, err := k.q.ListKeys(ctx)
	if err != nil {
		return nil, k.interpret(fmt.Errorf("list keys: %w", err))
	}
	keys := make([]Key, len(rows))
	for i, r := range rows {
		keys[i] = toKey(r)
	}
	return keys, nil
}

// Revoke revokes the key with this id (a key revoked before keeps its time), audited as done
// by actor. Every process refuses it within cacheTTL.
func (k *Keys) Revoke(ctx context.Context, actor Actor, id uuid.UUID) (Key, error) {
	row, err := database.WithTxV(ctx, k.pool, func(tx pgx.Tx) (authdb.ApiKey, error) {
		row, err := k.q.WithTx(tx).RevokeKey(ctx, id)
		if err != nil {
			return row, err
		}
		return row, audit(ctx, k.q.WithTx(tx), actor, "key.revoke", id.String(), map[string]any{"name": row.Name})
	})
	if err != nil {
		return Key{}, k.interpret(fmt.Errorf("revoke key %s: %w", id, err))
	}
	return toKey(row), nil
}

// Authenticate returns the principal of a secret, or ErrUnauthenticated for a secret that
// names no key or a revoked one. Lookups are cached for cacheTTL.
func (k *Keys) Authenticate(ctx context.Context, secret string) (Principal, error) {
	hash := string(hashSecret(secret))
	now := time.Now()
	k.mu.Lock()
	c, ok := k.cache[hash]
	missAt, miss := k.unknown[hash]
	k.mu.Unlock()
	if miss && now.Sub(missAt) <= cacheTTL {
		return Principal{}, ErrUnauthenticated
	}
	if !ok || now.Sub(c.at) > cacheTTL {
		var err error
		if c, err = k.lookup(ctx, hash, now); err != nil {
			return Principal{}, err
		}
	}
	if !c.valid {
		return Principal{}, ErrUnauthenticated
	}
	k.mu.Lock()
	k.used[c.principal.KeyID] = now
	k.mu.Unlock()
	return c.principal, nil
}

func (k *Keys) lookup(ctx context.Context, hash string, now time.Time) (cached, error) {
	k.mu.Lock()
	k.lookups++
	k.mu.Unlock()
	row, err := k.q.KeyBySecretHash(ctx, []byte(hash))
	c := cached{at: now}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		k.rememberUnknown(hash, now)
		return c, nil
	case err != nil:
		return c, k.interpret(fmt.Errorf("look up key: %w", err))
	default:
		key := toKey(row)
		c.valid = key.RevokedAt == nil
		c.principal = Principal{KeyID: key.ID, Name: key.Name, Scopes: key.Scopes}
		if key.Owner != nil {
			c.principal.Owner = *key.Owner
		}
	}
	k.mu.Lock()
	if len(k.cache) >= cacheLimit {
		k.cache = map[string]cached{}
	}
	k.cache[hash] = c
	k.mu.Unlock()
	return c, nil
}

// rememberUnknown caches a secret that names no key; past unknownLimit the unknown cache alone
// starts afresh.
func (k *Keys) rememberUnknown(hash string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.unknown) >= unknownLimit {
		k.unknown = map[string]time.Time{}
	}
	k.unknown[hash] = now
	delete(k.cache, hash)
}

// Run writes the keys' last-used times every touchEvery until ctx is cancelled, and once more
// then: a write per request would cost the hot path a statement.
func (k *Keys) Run(ctx context.Context) error {
	ticker := time.NewTicker(touchEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = k.flushUsed(flushCtx)
			return nil
		case <-ticker.C:
			_ = k.flushUsed(ctx) // a failed write is retried at the next tick: the times stay in used
		}
	}
}

// touchEvery is how often last-used times are written.
const touchEvery = 30 * time.Second

func (k *Keys) flushUsed(ctx context.Context) error {
	k.mu.Lock()
	used := k.used
	k.used = map[uuid.UUID]time.Time{}
	k.mu.Unlock()
	if len(used) == 0 {
		return nil
	}
	p := authdb.TouchKeysParams{}
	for id, at := range used {
		p.Ids, p.Ats = append(p.Ids, id), append(p.Ats, at)
	}
	if err := k.q.TouchKeys(ctx, p); err != nil {
		k.mu.Lock()
		for id, at := range used {
			if later, ok := k.used[id]; !ok || later.Before(at) {
				k.used[id] = at
			}
		}
		k.mu.Unlock()
		return k.interpret(fmt.Errorf("record keys' last use: %w", err))
	}
	return nil
}

func (k *Keys) interpret(err error) error {
	return database.Interpret(err, ErrKeyNotFound, ErrUnavailable)
}

func toKey(r authdb.ApiKey) Key {
	scopes := make([]Scope, len(r.Scopes))
	for i, s := range r.Scopes {
		scopes[i] = Scope(s)
	}
	return Key{ID: r.ID, Name: r.Name, Scopes: scopes, Owner: r.Owner, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}
}

// Actor is who did an administrative action: a key (over HTTP) or an operator's command.
type Actor struct {
	KeyID *uuid.UUID
	Name  string // the key's name, or "cli:<user>"
}

// ActorOf is the actor of a request's principal.
func ActorOf(p Principal) Actor {
	id := p.KeyID
	return Actor{KeyID: &id, Name: p.Name}
}

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	KeyID  *uuid.UUID      `json:"key_id"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Record records an administrative action in the audit trail, in a transaction of its own.
func (k *Keys) Record(ctx context.Context, actor Actor, action, target string, detail any) error {
	if err := audit(ctx, k.q, actor, action, target, detail); err != nil {
		return k.interpret(err)
	}
	return nil
}

// Audit records an administrative action in db (the caller's transaction, so that the record
// commits with the action, or the pool).
func Audit(ctx context.Context, db database.Executor, actor Actor, action, target string, detail any) error {
	return audit(ctx, authdb.New(db), actor, action, target, detail)
}

func audit(ctx context.Context, q *authdb.Queries, actor Actor, action, target string, detail any) error {
	var raw []byte
	if detail != nil {
		var err error
		if raw, err = json.Marshal(detail); err != nil {
			return fmt.Errorf("encode audit detail: %w", err)
		}
	}
	var keyID uuid.NullUUID
	if actor.KeyID != nil {
		keyID = uuid.NullUUID{UUID: *actor.KeyID, Valid: true}
	}
	err := q.InsertAudit(ctx, authdb.InsertAuditParams{KeyID: keyID, Actor: actor.Name, Action: action, Target: target, Detail: raw})
	if err != nil {
		return fmt.Errorf("audit %s %s: %w", action, target, err)
	}
	return nil
}

// AuditLog returns up to limit entries after the entry with id after (0: from the first).
func (k *Keys) AuditLog(ctx context.Context, after int64, limit int) ([]AuditEntry, error) {
	rows, err := k.q.ListAudit(ctx, authdb.ListAuditParams{AfterID: after, RowLimit: int32(limit)})
	if err != nil {
		return nil, k.interpret(fmt.Errorf("list audit: %w", err))
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail}
		if r.KeyID.Valid {
			out[i].KeyID = &r.KeyID.UUID
		}
	}
	return out, nil
}
