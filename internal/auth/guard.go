package auth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// Authenticator finds the principal of a secret (Keys does).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (Principal, error)
}

// RateLimit is each key's allowance: a steady rate and a burst above it.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// DefaultRateLimit is a key's allowance unless configured.
var DefaultRateLimit = RateLimit{PerSecond: 1000, Burst: 2000}

// ParseRateLimit reads "RATE" or "RATE:BURST" (requests per second; burst defaults to twice
// the rate).
func ParseRateLimit(raw string) (RateLimit, error) {
	rateRaw, burstRaw, hasBurst := strings.Cut(strings.TrimSpace(raw), ":")
	perSecond, err := strconv.ParseFloat(rateRaw, 64)
	if err != nil || perSecond <= 0 || math.IsInf(perSecond, 0) {
		return RateLimit{}, fmt.Errorf("rate limit %q: want requests per second, optionally :burst, such as 1000:2000", raw)
	}
	limit := RateLimit{PerSecond: perSecond, Burst: int(math.Ceil(2 * perSecond))}
	if hasBurst {
		if limit.Burst, err = strconv.Atoi(burstRaw); err != nil || limit.Burst < 1 {
			return RateLimit{}, fmt.Errorf("rate limit %q: the burst must be a whole number of at least 1", raw)
		}
	}
	return limit, nil
}

// String is the form ParseRateLimit reads.
func (l RateLimit) String() string {
	return strconv.FormatFloat(l.PerSecond, 'f', -1, 64) + ":" + strconv.Itoa(l.Burst)
}

// Guard lets a request through only with a valid API key that holds the route's scope and is
// within its rate limit. Every refusal is a problem: 401 (with WWW-Authenticate: Bearer) for
// a missing, unknown or revoked key, 403 for a missing scope, 429 (with Retry-After) over the
// rate. A client address over its allowance of failed authentications (401s) is answered 429
// auth-failures-limited before its key is looked up. The key's secret never reaches a log; its
// id and name do.
type Guard struct {
	keys        Authenticator
	limit       RateLimit
	unavailable *problem.Error // the service's answer when its database is away
	failures    *failures

	mu       sync.Mutex
	limiters map[uuid.UUID]*rate.Limiter
}

// NewGuard returns a guard authenticating with keys and allowing each key limit; when the keys'
// database is away it answers unavailable (the service's own problem for that). Each client
// address may fail DefaultFailureLimit (LimitFailures changes it).
func NewGuard(keys Authenticator, limit RateLimit, unavailable *problem.Error) *Guard {
	return &Guard{keys: keys, limit: limit, unavailable: unavailable, failures: newFailures(DefaultFailureLimit),
		limiters: map[uuid.UUID]*rate.Limiter{}}
}

// LimitFailures sets each client address's allowance of failed authentications; call it before
// the guard serves.
func (g *Guard) LimitFailures(limit RateLimit) *Guard {
	g.failures = newFailures(limit)
	return g
}

// Require serves h to requests whose key holds scope. h finds the principal in the request's
// context (FromContext).
func (g *Guard) Require(scope Scope, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := g.authenticate(r)
		if err != nil {
			var limited *failuresLimited
			if errors.As(err, &limited) {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.wait.Seconds()))))
			}
			if errors.Is(err, ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="walletgl"`)
			}
			web.WriteProblem(w, r, err)
			return
		}
		log := zerolog.Ctx(r.Context()).With().Str("key_id", p.KeyID.String()).Str("key_name", p.Name).Logger()
		r = r.WithContext(WithPrincipal(log.WithContext(r.Context()), p))
		if !p.Has(scope) {
			web.WriteProblem(w, r, problem.Newf(ErrForbidden, "the API key %q does not hold the scope %s", p.Name, scope))
			return
		}
		if wait, ok := g.allow(p.KeyID); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			web.WriteProblem(w, r, problem.Newf(ErrRateLimited, "the API key %q is over %s requests per second; retry in %s", p.Name,
				strconv.FormatFloat(g.limit.PerSecond, 'f', -1, 64), wait.Round(time.Millisecond)))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Authorize checks a secret the caller already holds (the operator console keeps a session's
// key on the server) as Require checks a bearer token: the key must be valid, hold scope and
// be within its rate limit; an empty scope asks for a valid key only. Errors are problems, as
// Require answers them. Failed authentications count against the client address ctx carries
// (WithClient), when it carries one.
func (g *Guard) Authorize(ctx context.Context, secret string, scope Scope) (Principal, error) {
	addr, counted := clientOf(ctx)
	var (
		p   Principal
		err error
	)
	if counted {
		p, err = g.lookupFrom(ctx, addr, secret)
	} else {
		p, err = g.lookup(ctx, secret)
	}
	if err != nil {
		return Principal{}, err
	}
	if scope != "" && !p.Has(scope) {
		return p, problem.Newf(ErrForbidden, "the API key %q does not hold the scope %s", p.Name, scope)
	}
	if wait, ok := g.allow(p.KeyID); !ok {
		return p, problem.Newf(ErrRateLimited, "the API key %q is over its rate limit; retry in %s", p.Name, wait.Round(time.Millisecond))
	}
	return p, nil
}

func (g *Guard) authenticate(r *http.Request) (Principal, error) {
	header := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(header, " ")
	switch {
	case header == "":
		return Principal{}, problem.Newf(ErrUnauthenticated, "the request has no API key: send Authorization: Bearer <key>")
	case !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "":
		return Principal{}, problem.Newf(ErrUnauthenticated, "the Authorization header must be: Bearer <key>")
	}
	return g.lookupFrom(r.Context(), ClientAddr(r), strings.TrimSpace(secret))
}

// failuresLimited is the refusal of a client address over its failed authentications, with
// how long until it may try again.
type failuresLimited struct {
	refusal *problem.Error
	wait    time.Duration
}

func (f *failuresLimited) Error() string { return f.refusal.Error() }
func (f *failuresLimited) Unwrap() error { return f.refusal }

// lookupFrom is lookup for a client at addr: refused at once while addr is over its failures,
// and a failure spent on an unknown or revoked key.
func (g *Guard) lookupFrom(ctx context.Context, addr, secret string) (Principal, error) {
	if wait := g.failures.blocked(addr); wait > 0 {
		return Principal{}, &failuresLimited{wait: wait, refusal: problem.Newf(ErrAuthFailuresLimited,
			"too many failed authentications from this address; retry in %s", wait.Round(time.Millisecond))}
	}
	p, err := g.lookup(ctx, secret)
	if errors.Is(err, ErrUnauthenticated) {
		g.failures.fail(addr)
	}
	return p, err
}

// lookup finds the principal of secret: the service's unavailable problem when the key store
// cannot be reached, unauthenticated for an unknown or revoked key.
func (g *Guard) lookup(ctx context.Context, secret string) (Principal, error) {
	p, err := g.keys.Authenticate(ctx, secret)
	if errors.Is(err, ErrUnavailable) {
		return Principal{}, fmt.Errorf("%w: %w", g.unavailable, err)
	}
	if err != nil {
		return Principal{}, problem.Newf(ErrUnauthenticated, "the API key is not valid (unknown or revoked)")
	}
	return p, nil
}

// allow takes one request from the key's allowance, or says how long until there is one.
func (g *Guard) allow(key uuid.UUID) (time.Duration, bool) {
	g.mu.Lock()
	lim, ok := g.limiters[key]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(g.limit.PerSecond), g.limit.Burst)
		g.limiters[key] = lim
	}
	g.mu.Unlock()
	res := lim.Reserve()
	if wait := res.Delay(); wait > 0 {
		res.Cancel()
		return wait, false
	}
	return 0, true
}
