package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// ownedKey makes a key of owner ("" for the platform) with scopes and returns its secret.
func (b *testBundle) ownedKey(t *testing.T, name, owner string, scopes ...auth.Scope) string {
	t.Helper()
	_, secret, err := auth.NewKeys(b.pool, auth.WalletScopes).CreateOwned(context.Background(), auth.Actor{Name: "test"}, name, owner, scopes)
	require.NoError(t, err)
	return secret
}

// as sends a request with secret, and the Idempotency-Key key unless it is "".
func (b *testBundle) as(t *testing.T, secret, key, method, path, body string) resp {
	t.Helper()
	h := authtest.Bearer(secret)
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	r := b.do(t, method, path, h, body)
	return resp{r, r.Status, r.Body, r.Header}
}

type resp struct {
	webtest.Response
	status int
	body   string
	header http.Header
}

// problem checks that the answer is this problem and returns its detail.
func (r resp) problem(t *testing.T, status int, slug string) string {
	t.Helper()
	return r.RequireProblem(t, status, slug).Detail
}

func decode(t *testing.T, body string, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(body), v), body)
}

func (b *testBundle) balance(t *testing.T, id string) int64 {
	t.Helper()
	var balance int64
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT balance FROM wallets WHERE id = $1", id).Scan(&balance))
	return balance
}

var ownerScopes = []auth.Scope{"wallets:read", "wallets:write", "transfers:read", "transfers:write"}

// A key with an owner acts for its owner alone: another owner's wallets, transfers and holds do
// not exist for it, it debits only its own wallets, and it may pay into any wallet.
func TestAKeyWithAnOwnerActsForItsOwnerAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acme := b.ownedKey(t, "acme", "acme", ownerScopes...)
	globex := b.ownedKey(t, "globex", "globex", ownerScopes...)

	res := b.as(t, acme, "", "POST", "/v1/wallets", `{"id":"acme-1","currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.Contains(t, res.body, `"owner":"acme"`)
	res = b.as(t, globex, "", "POST", "/v1/wallets", `{"id":"globex-1","currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	res = b.as(t, b.key, "", "GET", "/v1/wallets/alice", "")
	require.Contains(t, res.body, `"owner":null`, "a platform wallet")

	// The platform funds acme's wallet; acme holds part of it.
	res = b.as(t, b.key, "fund-acme", "POST", "/v1/transfers", `{"from_wallet_id":"mint","to_wallet_id":"acme-1","amount":100,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var funding struct{ ID string }
	decode(t, res.body, &funding)
	res = b.as(t, acme, "hold-1", "POST", "/v1/holds", `{"wallet_id":"acme-1","amount":10}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var hold struct{ ID string }
	decode(t, res.body, &hold)

	steps := []struct {
		name, method, path, body string
		status                   int
		slug, detail             string
	}{
		{"another owner's wallet is spent", "POST", "/v1/transfers",
			`{"from_wallet_id":"acme-1","to_wallet_id":"globex-1","amount":50,"currency":"USD"}`, 404, "wallet-not-found", `from_wallet_id "acme-1" does not exist`},
		{"the platform's wallet is spent", "POST", "/v1/transfers",
			`{"from_wallet_id":"alice","to_wallet_id":"globex-1","amount":50,"currency":"USD"}`, 404, "wallet-not-found", `from_wallet_id "alice" does not exist`},
		{"the funding wallet mints money", "POST", "/v1/transfers",
			`{"from_wallet_id":"mint","to_wallet_id":"globex-1","amount":50,"currency":"USD"}`, 404, "wallet-not-found", `from_wallet_id "mint" does not exist`},
		{"another owner's wallet is read", "GET", "/v1/wallets/acme-1", "", 404, "wallet-not-found", `wallet "acme-1" does not exist`},
		{"another owner's transfer is read", "GET", "/v1/transfers/" + funding.ID, "", 404, "transfer-not-found", fmt.Sprintf("transfer %s does not exist", funding.ID)},
		{"another owner's transfer's reversals are read", "GET", "/v1/transfers/" + funding.ID + "/reversals", "", 404, "transfer-not-found", fmt.Sprintf("transfer %s does not exist", funding.ID)},
		{"another owner's transfer is reversed", "POST", "/v1/transfers/" + funding.ID + "/reversal", `{"amount":10}`, 404, "transfer-not-found", fmt.Sprintf("transfer %s does not exist", funding.ID)},
		{"another owner's wallet is held", "POST", "/v1/holds", `{"wallet_id":"acme-1","amount":10}`, 404, "wallet-not-found", `wallet_id "acme-1" does not exist`},
		{"another owner's hold is read", "GET", "/v1/holds/" + hold.ID, "", 404, "hold-not-found", fmt.Sprintf("hold %s does not exist", hold.ID)},
		{"another owner's hold is captured", "POST", "/v1/holds/" + hold.ID + "/capture", `{"to_wallet_id":"globex-1"}`, 404, "hold-not-found", fmt.Sprintf("hold %s does not exist", hold.ID)},
		{"another owner's hold is voided", "POST", "/v1/holds/" + hold.ID + "/void", "", 404, "hold-not-found", fmt.Sprintf("hold %s does not exist", hold.ID)},
	}
	for i, s := range steps {
		res := b.as(t, globex, fmt.Sprintf("attack-%d", i), s.method, s.path, s.body)
		require.Equal(t, s.detail, res.problem(t, s.status, s.slug), s.name)
	}
	// The answers are those of things that do not exist.
	res = b.as(t, globex, "", "GET", "/v1/wallets/nosuch", "")
	require.Equal(t, `wallet "nosuch" does not exist`, res.problem(t, 404, "wallet-not-found"))
	require.Equal(t, int64(100), b.balance(t, "acme-1"), "nothing moved")

	// Listings hold the owner's own things only.
	res = b.as(t, globex, "", "GET", "/v1/transfers", "")
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.NotContains(t, res.body, funding.ID)
	res = b.as(t, globex, "", "GET", "/v1/holds", "")
	require.NotContains(t, res.body, hold.ID)
	res = b.as(t, acme, "", "GET", "/v1/holds", "")
	require.Contains(t, res.body, hold.ID)

	// acme pays globex: allowed into any wallet; both see the transfer; only the receiver
	// reverses it.
	res = b.as(t, acme, "pay-1", "POST", "/v1/transfers", `{"from_wallet_id":"acme-1","to_wallet_id":"globex-1","amount":30,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var paid struct{ ID string }
	decode(t, res.body, &paid)
	for _, key := range []string{acme, globex} {
		res = b.as(t, key, "", "GET", "/v1/transfers/"+paid.ID, "")
		require.Equal(t, http.StatusOK, res.status, res.body)
	}
	res = b.as(t, acme, "undo-1", "POST", "/v1/transfers/"+paid.ID+"/reversal", `{"amount":30}`)
	res.problem(t, http.StatusForbidden, "forbidden")
	res = b.as(t, globex, "undo-2", "POST", "/v1/transfers/"+paid.ID+"/reversal", `{"amount":10}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)

	// The owner's own hold: captured by its owner, into another owner's wallet.
	res = b.as(t, acme, "capture-1", "POST", "/v1/holds/"+hold.ID+"/capture", `{"to_wallet_id":"globex-1"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.Equal(t, int64(100-30+10-10), b.balance(t, "acme-1"))
	require.Equal(t, int64(30-10+10), b.balance(t, "globex-1"))

	// The platform still acts on every wallet.
	res = b.as(t, b.key, "", "GET", "/v1/wallets/acme-1", "")
	require.Equal(t, http.StatusOK, res.status, res.body)
}

// A wallet that may go negative creates money: debiting it needs wallets:admin, whoever asks.
func TestDebitingAWalletThatMayGoNegativeNeedsWalletsAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	writer := b.ownedKey(t, "writer", "", "wallets:read", "transfers:write")
	before := b.balance(t, "mint")
	res := b.as(t, writer, "mint-1", "POST", "/v1/transfers", `{"from_wallet_id":"mint","to_wallet_id":"bob","amount":1000000,"currency":"USD"}`)
	res.problem(t, http.StatusForbidden, "forbidden")
	res = b.as(t, writer, "mint-2", "POST", "/v1/holds", `{"wallet_id":"mint","amount":1000000}`)
	res.problem(t, http.StatusForbidden, "forbidden")
	require.Equal(t, before, b.balance(t, "mint"))
	require.Equal(t, int64(0), b.balance(t, "bob"))

	admin := b.ownedKey(t, "treasurer", "", "transfers:write", "wallets:admin")
	res = b.as(t, admin, "mint-3", "POST", "/v1/transfers", `{"from_wallet_id":"mint","to_wallet_id":"bob","amount":5,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
}

// Idempotency-Keys belong to their owner: another owner's same key is another request, and
// never answers with the first owner's transfer; one owner's keys share them.
func TestIdempotencyKeysBelongToTheirOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acme := b.ownedKey(t, "acme", "acme", ownerScopes...)
	acme2 := b.ownedKey(t, "acme-2", "acme", ownerScopes...)
	globex := b.ownedKey(t, "globex", "globex", ownerScopes...)
	for key, id := range map[string]string{acme: "acme-1", globex: "globex-1"} {
		res := b.as(t, key, "", "POST", "/v1/wallets", fmt.Sprintf(`{"id":%q,"currency":"USD"}`, id))
		require.Equal(t, http.StatusCreated, res.status, res.body)
		res = b.as(t, b.key, "fund-"+id, "POST", "/v1/transfers", fmt.Sprintf(`{"from_wallet_id":"mint","to_wallet_id":%q,"amount":100,"currency":"USD"}`, id))
		require.Equal(t, http.StatusCreated, res.status, res.body)
	}
	acmeBody := `{"from_wallet_id":"acme-1","to_wallet_id":"bob","amount":10,"currency":"USD"}`
	res := b.as(t, acme, "order-1", "POST", "/v1/transfers", acmeBody)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var first struct{ ID string }
	decode(t, res.body, &first)

	// Another owner with acme's key and body: not acme's transfer (its wallet is not found).
	res = b.as(t, globex, "order-1", "POST", "/v1/transfers", acmeBody)
	require.NotContains(t, res.body, first.ID)
	res.problem(t, http.StatusNotFound, "wallet-not-found")
	require.Empty(t, res.header.Get("Idempotency-Replayed"))
	// With its own body: its own transfer, new, under the same key.
	res = b.as(t, globex, "order-1", "POST", "/v1/transfers", `{"from_wallet_id":"globex-1","to_wallet_id":"bob","amount":20,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.NotContains(t, res.body, first.ID)
	require.Empty(t, res.header.Get("Idempotency-Replayed"))
	// The platform's key space is its own too.
	res = b.as(t, b.key, "order-1", "POST", "/v1/transfers", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	// Another key of acme replays acme's transfer.
	res = b.as(t, acme2, "order-1", "POST", "/v1/transfers", acmeBody)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	require.Contains(t, res.body, first.ID)
	require.Equal(t, "true", res.header.Get("Idempotency-Replayed"))
	require.Equal(t, int64(90), b.balance(t, "acme-1"))
	require.Equal(t, int64(80), b.balance(t, "globex-1"))

	// Holds' keys too.
	for _, key := range []string{acme, globex} {
		wallet := map[string]string{acme: "acme-1", globex: "globex-1"}[key]
		res = b.as(t, key, "hold-1", "POST", "/v1/holds", fmt.Sprintf(`{"wallet_id":%q,"amount":5}`, wallet))
		require.Equal(t, http.StatusCreated, res.status, res.body)
		require.Empty(t, res.header.Get("Idempotency-Replayed"))
	}
}

// Once a request started executing its answer is kept under its key, a refusal included: the
// same key and body replay the 422, another body is idempotency-key-reused. A 400 keeps nothing.
func TestARefusalIsKeptUnderItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refusedThenReplayed := func(name, key, path, body, other, slug string) {
		t.Helper()
		res := b.as(t, b.key, key, "POST", path, body)
		first := res.problem(t, http.StatusUnprocessableEntity, slug)
		require.Empty(t, res.header.Get("Idempotency-Replayed"), name)
		res = b.as(t, b.key, key, "POST", path, body)
		require.Equal(t, first, res.problem(t, http.StatusUnprocessableEntity, slug), name)
		require.Equal(t, "true", res.header.Get("Idempotency-Replayed"), name)
		res = b.as(t, b.key, key, "POST", path, other)
		res.problem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	}
	refusedThenReplayed("a transfer", "t-1", "/v1/transfers",
		`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":5000,"currency":"USD"}`,
		`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD"}`, "insufficient-funds")
	refusedThenReplayed("a hold", "h-1", "/v1/holds", `{"wallet_id":"alice","amount":5000}`, `{"wallet_id":"alice","amount":10}`, "insufficient-funds")

	res := b.as(t, b.key, "t-2", "POST", "/v1/transfers", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":100,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var paid struct{ ID string }
	decode(t, res.body, &paid)
	refusedThenReplayed("a reversal", "r-1", "/v1/transfers/"+paid.ID+"/reversal", `{"amount":500}`, `{"amount":5}`, "reversal-exceeds-transfer")

	res = b.as(t, b.key, "h-2", "POST", "/v1/holds", `{"wallet_id":"alice","amount":50}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var hold struct{ ID string }
	decode(t, res.body, &hold)
	refusedThenReplayed("a capture", "c-1", "/v1/holds/"+hold.ID+"/capture", `{"to_wallet_id":"bob","amount":80}`, `{"to_wallet_id":"bob","amount":5}`, "capture-exceeds-hold")

	// A 400 keeps nothing: the key is free for a valid request.
	invalid := openapitest.Invalid(http.Header{"Idempotency-Key": {"t-3"}}, "a lower-case currency")
	b.do(t, "POST", "/v1/transfers", invalid, `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"usd"}`).
		RequireProblem(t, http.StatusBadRequest, "invalid-currency")
	res = b.as(t, b.key, "t-3", "POST", "/v1/transfers", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)

	var refusals int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM refusals WHERE expires_at > now()").Scan(&refusals))
	require.Equal(t, 4, refusals)
	require.Equal(t, int64(1000-100-10), b.balance(t, "alice"))
}

// A refusal tells a key that may not read the wallet nothing of its balance.
func TestARefusalNamesNoBalance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	writer := b.ownedKey(t, "writer", "", "transfers:write")
	for i, path := range []string{"/v1/transfers", "/v1/holds"} {
		body := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1001,"currency":"USD"}`
		if path == "/v1/holds" {
			body = `{"wallet_id":"alice","amount":1001}`
		}
		res := b.as(t, writer, fmt.Sprintf("peek-%d", i), "POST", path, body)
		detail := res.problem(t, http.StatusUnprocessableEntity, "insufficient-funds")
		require.NotContains(t, detail, "1000", "alice's balance")
		require.False(t, strings.Contains(res.body, "1000"), res.body)
	}
}
