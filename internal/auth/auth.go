// Package auth owns who may call a service: API keys (high-entropy secrets shown once and
// stored only as a hash, with a name, scopes, created and last-used times and revocation), the
// scopes each service knows, the HTTP guard that authenticates a request, checks its scope and
// limits its rate, and the append-only audit trail of administrative actions. Each service
// keeps its keys and its audit in its own database (migration set "auth").
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/problem"
)

// Scope is a permission a key holds.
type Scope string

// Admin implies every scope of its service.
const Admin Scope = "admin"

// MetricsRead lets Prometheus scrape GET /metrics on the API address (both services).
const MetricsRead Scope = "metrics:read"

// The scopes of each service.
var (
	WalletScopes = []Scope{"wallets:read", "wallets:write", "wallets:admin", "transfers:read", "transfers:write", "transfers:admin", "outbox:admin", "inbox:admin", MetricsRead, Admin}
	GLScopes     = []Scope{"ledger:read", "ledger:write", "inbox:admin", MetricsRead, Admin}
)

// ParseScopes reads a comma-separated list of scopes, each one of known.
func ParseScopes(raw string, known []Scope) ([]Scope, error) {
	var out []Scope
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(known, Scope(s)) {
			return nil, fmt.Errorf("scope %q is not one of %s", s, joinScopes(known))
		}
		if !slices.Contains(out, Scope(s)) {
			out = append(out, Scope(s))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("give at least one scope of %s", joinScopes(known))
	}
	return out, nil
}

func joinScopes(scopes []Scope) string {
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateOwner reports whether owner can own keys and wallets: 1 to 64 letters, digits, '.',
// '_' or '-'.
func ValidateOwner(owner string) error {
	if !ownerPattern.MatchString(owner) {
		return fmt.Errorf("owner %q: an owner is 1 to 64 letters, digits, '.', '_' or '-'", owner)
	}
	return nil
}

// Key is an API key as an operator sees it: never its secret.
type Key struct {
	ID         uuid.UUID  `json:"id"`
	Name       string     `json:"name"`
	Scopes     []Scope    `json:"scopes"`
	Owner      *string    `json:"owner"` // nil: a key of the platform
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// Principal is who a request acts as: the key that authenticated it.
type Principal struct {
	KeyID  uuid.UUID
	Name   string
	Scopes []Scope
	// Owner is whom the key acts for: "" for the platform (every wallet), else a customer
	// that sees and debits only its own wallets.
	Owner string
}

// Has reports whether p holds scope, directly or through Admin.
func (p Principal) Has(scope Scope) bool {
	return slices.Contains(p.Scopes, Admin) || slices.Contains(p.Scopes, scope)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal of the request ctx belongs to.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// secretPrefix starts every key, so that a secret pasted where it does not belong is
// recognisable (and secret scanners can find it).
const secretPrefix = "wgl_"

// newSecret returns a fresh secret: 32 random bytes, base64url, behind the prefix.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new key secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// hashSecret is what the database keeps of a secret. A fast hash is enough: the secret has 256
// bits of entropy, so there is nothing to guess, and it is what a request is looked up by.
func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// Problems of the guard.
var (
	ErrUnauthenticated = problem.New(problem.Unauthenticated, "unauthenticated",
		"send a valid API key: Authorization: Bearer <key>")
	ErrForbidden   = problem.New(problem.Forbidden, "forbidden", "the API key does not allow this request")
	ErrRateLimited = problem.New(problem.TooManyRequests, "rate-limited", "the API key is over its rate limit; retry later")
	// ErrAuthFailuresLimited refuses a client address that failed to authenticate too often,
	// before its key is looked up.
	ErrAuthFailuresLimited = problem.New(problem.TooManyRequests, "auth-failures-limited",
		"too many failed authentications from this address; retry later")
)
