package httpapi_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/web/openapitest"
)

// An attack session, step by step against the real API and database: every step
// is refused with a clear 4xx problem, and nothing is written.
func TestTheAttackSessionFailsAtEveryStepAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	keys := auth.NewKeys(b.pool, auth.WalletScopes)
	_, reader, err := keys.Create(ctx, auth.Actor{Name: "test"}, "reader", []auth.Scope{"transfers:read", "wallets:read"})
	require.NoError(t, err)
	_, writer, err := keys.Create(ctx, auth.Actor{Name: "test"}, "writer", []auth.Scope{"wallets:write", "transfers:write"})
	require.NoError(t, err)
	gone, goneSecret, err := keys.Create(ctx, auth.Actor{Name: "test"}, "gone", []auth.Scope{auth.Admin})
	require.NoError(t, err)
	_, err = keys.Revoke(ctx, auth.Actor{Name: "test"}, gone.ID)
	require.NoError(t, err)
	// A wallet already near the top of what a balance holds (funds accumulated over time).
	_, err = b.pool.Exec(ctx, "UPDATE wallets SET balance = $1 WHERE id = 'bob'", int64(math.MaxInt64-10))
	require.NoError(t, err)
	before := b.counts(t)

	transfer := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`
	with := func(secret string, extra ...string) http.Header {
		h := authtest.Bearer(secret)
		h.Set("Idempotency-Key", fmt.Sprintf("attack-%d", len(extra)))
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	// No API key: the document refuses it too.
	anonymous := openapitest.Invalid(http.Header{"Authorization": {""}, "Idempotency-Key": {"attack-anon"}}, "no API key")
	// What the OpenAPI document refuses too, and what it cannot tell (a JSON name given twice).
	invalid := func(h http.Header) http.Header { return openapitest.Invalid(h, "against the request body's schema") }
	unchecked := func(h http.Header) http.Header { return openapitest.Unchecked(h, "a JSON name given twice") }
	steps := []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		slug               string
	}{
		{"an anonymous transfer", "POST", "/v1/transfers", anonymous, transfer, 401, "unauthenticated"},
		{"an anonymous listing of every transfer", "GET", "/v1/transfers", anonymous, "", 401, "unauthenticated"},
		{"an anonymous requeue", "POST", "/v1/admin/outbox/requeue", anonymous, `{"status":"dead_letter"}`, 401, "unauthenticated"},
		{"a transfer with a read-only key", "POST", "/v1/transfers", with(reader), transfer, 403, "forbidden"},
		{"a requeue without outbox:admin", "POST", "/v1/admin/outbox/requeue", with(writer), `{"status":"dead_letter"}`, 403, "forbidden"},
		{"a transfer with a revoked key", "POST", "/v1/transfers", with(goneSecret), transfer, 401, "unauthenticated"},
		{"a wallet that may go negative without wallets:admin", "POST", "/v1/wallets", with(writer),
			`{"id":"mint2","currency":"USD","allow_negative":true}`, 403, "forbidden"},
		{"minting 2^63-1", "POST", "/v1/transfers", invalid(with(writer)),
			fmt.Sprintf(`{"from_wallet_id":"mint","to_wallet_id":"alice","amount":%d,"currency":"USD"}`, int64(math.MaxInt64)), 400, "invalid-request"},
		{"a browser's text/plain form post", "POST", "/v1/wallets", invalid(with(writer, "Content-Type", "text/plain")),
			`{"id":"csrf","currency":"USD"}`, 415, "unsupported-media-type"},
		{"a duplicated amount", "POST", "/v1/transfers", unchecked(with(writer)),
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"amount":7,"currency":"USD"}`, 400, "invalid-request"},
		{"a duplicated allow_negative", "POST", "/v1/wallets", unchecked(with(writer)),
			`{"id":"dup","currency":"USD","allow_negative":false,"allow_negative":true}`, 400, "invalid-request"},
		{"a field name in another case", "POST", "/v1/transfers", invalid(with(writer)),
			`{"from_wallet_id":"alice","to_wallet_id":"bob","Amount":7,"amount":1,"currency":"USD"}`, 400, "invalid-request"},
		{"a transfer that would overflow a balance", "POST", "/v1/transfers", with(writer, "Idempotency-Key", "attack-overflow"),
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":100,"currency":"USD"}`, 422, "balance-out-of-range"},
	}
	for _, s := range steps {
		res := b.do(t, s.method, s.path, s.header, s.body)
		res.RequireProblem(t, s.status, s.slug)
		if s.status == http.StatusUnauthorized {
			require.Contains(t, res.Header.Get("WWW-Authenticate"), "Bearer", s.name)
		}
	}
	require.Equal(t, before, b.counts(t), "nothing written")
}

// counts is how many wallets, transfers and outbox rows the database holds.
func (b *testBundle) counts(t *testing.T) [3]int {
	t.Helper()
	var c [3]int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM wallets), (SELECT count(*) FROM transfers), (SELECT count(*) FROM outbox)").Scan(&c[0], &c[1], &c[2]))
	return c
}
