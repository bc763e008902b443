// Package authtest gives tests of an API behind auth.Guard a real key in the test's database.
package authtest

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/problem"
)

// Unavailable is the guard's answer in tests when the keys' database is away.
var Unavailable = problem.New(problem.Unavailable, "unavailable", "retry later")

// Unlimited is a rate limit no test reaches.
var Unlimited = auth.RateLimit{PerSecond: 1e9, Burst: 1 << 30}

// Key creates a key holding scopes (auth.Admin when none) in pool's database, which has the
// auth migrations, and returns the keys of that database, a guard over them without a rate
// limit, and the key's secret.
func Key(t testing.TB, pool *pgxpool.Pool, known []auth.Scope, scopes ...auth.Scope) (*auth.Keys, *auth.Guard, string) {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []auth.Scope{auth.Admin}
	}
	keys := auth.NewKeys(pool, known)
	_, secret, err := keys.Create(context.Background(), auth.Actor{Name: "test"}, "test", scopes)
	require.NoError(t, err)
	return keys, auth.NewGuard(keys, Unlimited, Unavailable), secret
}

// Bearer is the header that sends secret.
func Bearer(secret string) http.Header {
	return http.Header{"Authorization": {"Bearer " + secret}}
}
