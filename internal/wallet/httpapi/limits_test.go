package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth/authtest"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web/openapitest"
)

type limitsAnswer struct {
	Balance      int64  `json:"balance"`
	Available    int64  `json:"available"`
	MinBalance   *int64 `json:"min_balance"`
	MaxBalance   *int64 `json:"max_balance"`
	BelowMinimum int64  `json:"below_minimum"`
}

func (b *testBundle) limits(t *testing.T, id string) limitsAnswer {
	t.Helper()
	res := b.do(t, http.MethodGet, "/v1/wallets/"+id, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var a limitsAnswer
	res.Decode(t, &a)
	return a
}

// wallet creates a USD wallet with the limits of body (a JSON fragment, "" for none) funded
// from mint with balance.
func (b *testBundle) limitedWallet(t *testing.T, id, limits string, balance int64) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"currency":"USD"%s}`, id, limits)
	res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	if balance > 0 {
		res = b.transfer(t, "fund-"+id, fmt.Sprintf(`{"from_wallet_id":"mint","to_wallet_id":%q,"amount":%d,"currency":"USD"}`, id, balance))
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
}

func TestWalletLimitsAreCreatedShownAndValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPost, "/v1/wallets", nil, `{"id":"carol","currency":"USD","min_balance":-500,"max_balance":2000}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.JSONEq(t, `{"id":"carol","currency":"USD","minor_units":2,"balance":0,"held":0,"available":0,"allow_negative":false,"min_balance":-500,"max_balance":2000,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
	res = b.do(t, http.MethodGet, "/v1/wallets/mint", nil, "")
	require.JSONEq(t, `{"id":"mint","currency":"USD","minor_units":2,"balance":-1000,"held":0,"available":-1000,"allow_negative":true,"min_balance":null,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)

	for _, body := range []string{
		`{"id":"x1","currency":"USD","allow_negative":true,"min_balance":-5}`,
		`{"id":"x2","currency":"USD","allow_negative":true,"min_balance":0}`,
	} {
		b.do(t, http.MethodPost, "/v1/wallets", nil, body).RequireProblem(t, http.StatusBadRequest, "invalid-request")
	}
	for _, body := range []string{
		`{"id":"x3","currency":"USD","min_balance":1}`,
		`{"id":"x4","currency":"USD","max_balance":-1}`,
	} {
		b.do(t, http.MethodPost, "/v1/wallets", b.invalid("a limit out of range"), body).RequireProblem(t, http.StatusBadRequest, "invalid-request")
	}
	writer := b.ownedKey(t, "writer", "", httpapi.ScopeWalletsWrite)
	b.as(t, writer, "", http.MethodPost, "/v1/wallets", `{"id":"x5","currency":"USD","min_balance":-1}`).problem(t, http.StatusForbidden, "forbidden")
	res2 := b.as(t, writer, "", http.MethodPost, "/v1/wallets", `{"id":"x6","currency":"USD","min_balance":0,"max_balance":10}`)
	require.Equal(t, http.StatusCreated, res2.status, res2.body)
}

// Every movement through the service keeps both bounds, the database's checks included: at
// the bound it passes, one unit past it is refused.
func TestEveryMovementKeepsTheLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.limitedWallet(t, "credit", `,"min_balance":-100`, 50) // may spend 150
	b.limitedWallet(t, "capped", `,"max_balance":300`, 0)   // may receive 300

	// Transfers: the sender's minimum, the receiver's maximum.
	b.transfer(t, "t-past", `{"from_wallet_id":"credit","to_wallet_id":"bob","amount":151,"currency":"USD"}`).RequireProblem(t, 422, "balance-below-minimum")
	b.transfer(t, "t-past-max", `{"from_wallet_id":"alice","to_wallet_id":"capped","amount":301,"currency":"USD"}`).RequireProblem(t, 422, "balance-above-maximum")
	res := b.transfer(t, "t-at-max", `{"from_wallet_id":"alice","to_wallet_id":"capped","amount":300,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	// A deposit past the maximum.
	b.transfer(t, "d-past", `{"from_wallet_id":"mint","to_wallet_id":"capped","amount":1,"currency":"USD"}`).RequireProblem(t, 422, "balance-above-maximum")

	// Holds: available against the minimum; a capture against the receiver's maximum.
	b.hold(t, http.MethodPost, "/v1/holds", "h-past", `{"wallet_id":"credit","amount":151,"expires_in":3600}`).RequireProblem(t, 422, "balance-below-minimum")
	res = b.hold(t, http.MethodPost, "/v1/holds", "h-at", `{"wallet_id":"credit","amount":150,"expires_in":3600}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var h struct {
		ID string `json:"id"`
	}
	res.Decode(t, &h)
	require.Equal(t, limitsAnswer{Balance: 50, Available: -100, MinBalance: ptr(-100)}, b.limits(t, "credit"))
	b.transfer(t, "t-held", `{"from_wallet_id":"credit","to_wallet_id":"bob","amount":1,"currency":"USD"}`).RequireProblem(t, 422, "balance-below-minimum")
	b.do(t, http.MethodPatch, "/v1/wallets/capped", nil, `{"max_balance":449}`) // 300 now: 149 more
	b.hold(t, http.MethodPost, "/v1/holds/"+h.ID+"/capture", "c-past", `{"to_wallet_id":"capped","amount":150}`).RequireProblem(t, 422, "balance-above-maximum")
	res = b.hold(t, http.MethodPost, "/v1/holds/"+h.ID+"/capture", "c-at", `{"to_wallet_id":"capped","amount":149}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Equal(t, limitsAnswer{Balance: -99, Available: -99, MinBalance: ptr(-100)}, b.limits(t, "credit"))

	// A withdrawal down to the minimum exactly, then one past it.
	b.transfer(t, "w-past", `{"from_wallet_id":"credit","to_wallet_id":"mint","amount":2,"currency":"USD"}`).RequireProblem(t, 422, "balance-below-minimum")
	res = b.transfer(t, "w-at", `{"from_wallet_id":"credit","to_wallet_id":"mint","amount":1,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)

	// Reversals: the original's receiver keeps its minimum, its sender its maximum.
	b.limitedWallet(t, "payer", `,"max_balance":1000`, 1000)
	b.limitedWallet(t, "payee", `,"min_balance":-10`, 0)
	var orig struct {
		ID string `json:"id"`
	}
	res = b.transfer(t, "p-1", `{"from_wallet_id":"payer","to_wallet_id":"payee","amount":400,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res.Decode(t, &orig)
	res = b.transfer(t, "p-spend", `{"from_wallet_id":"payee","to_wallet_id":"bob","amount":390,"currency":"USD"}`) // 10 left, min -10
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	reverse := func(key, body string) (int, string) {
		res := b.do(t, http.MethodPost, "/v1/transfers/"+orig.ID+"/reversal", http.Header{"Idempotency-Key": {key}}, body)
		return res.Status, res.Body
	}
	b.do(t, http.MethodPost, "/v1/transfers/"+orig.ID+"/reversal", http.Header{"Idempotency-Key": {"r-past-min"}}, `{"amount":21}`).RequireProblem(t, 422, "balance-below-minimum")
	status, body := reverse("r-at-min", `{"amount":20}`)
	require.Equal(t, http.StatusCreated, status, body)
	res = b.transfer(t, "p-top", `{"from_wallet_id":"mint","to_wallet_id":"payee","amount":100,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res = b.transfer(t, "p-fill", `{"from_wallet_id":"mint","to_wallet_id":"payer","amount":330,"currency":"USD"}`) // 620 → 950
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	b.do(t, http.MethodPost, "/v1/transfers/"+orig.ID+"/reversal", http.Header{"Idempotency-Key": {"r-past-max"}}, `{"amount":51}`).RequireProblem(t, 422, "balance-above-maximum")
	status, body = reverse("r-at-max", `{"amount":50}`)
	require.Equal(t, http.StatusCreated, status, body)
	require.Equal(t, limitsAnswer{Balance: 1000, Available: 1000, MinBalance: ptr(0), MaxBalance: ptr(1000)}, b.limits(t, "payer"))
	b.requireVerified(t)

	// The database keeps both bounds too, whatever writes to it.
	for _, sql := range []string{
		`UPDATE wallets SET balance = balance + 1 WHERE id = 'payer'`,
		`UPDATE wallets SET balance = balance - 1 WHERE id = 'credit'`,
	} {
		_, err := b.pool.Exec(context.Background(), sql)
		require.Error(t, err, sql)
	}
}

func TestChangingLimitsNeedsWalletsAdminAndIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	writer := b.ownedKey(t, "writer", "", httpapi.ScopeWalletsWrite, httpapi.ScopeWalletsRead)
	b.as(t, writer, "", http.MethodPatch, "/v1/wallets/alice", `{"min_balance":-100}`).problem(t, http.StatusForbidden, "forbidden")

	res := b.do(t, http.MethodPatch, "/v1/wallets/alice", nil, `{"min_balance":-100,"max_balance":1000}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, limitsAnswer{Balance: 1000, Available: 1000, MinBalance: ptr(-100), MaxBalance: ptr(1000)}, b.limits(t, "alice"))
	res = b.do(t, http.MethodPatch, "/v1/wallets/alice", nil, `{"max_balance":null}`) // the minimum stays
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, limitsAnswer{Balance: 1000, Available: 1000, MinBalance: ptr(-100)}, b.limits(t, "alice"))

	b.do(t, http.MethodPatch, "/v1/wallets/alice", nil, `{"max_balance":999}`).RequireProblem(t, 422, "balance-above-maximum")
	b.do(t, http.MethodPatch, "/v1/wallets/mint", nil, `{"min_balance":-1}`).RequireProblem(t, 400, "invalid-request")
	b.do(t, http.MethodPatch, "/v1/wallets/alice", b.invalid("no field"), `{}`).RequireProblem(t, 400, "invalid-request")
	b.do(t, http.MethodPatch, "/v1/wallets/alice", b.invalid("a string"), `{"min_balance":"x"}`).RequireProblem(t, 400, "invalid-request")
	b.do(t, http.MethodPatch, "/v1/wallets/nobody", nil, `{"min_balance":0}`).RequireProblem(t, 404, "wallet-not-found")
	res = b.transfer(t, "spend", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1050,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	b.do(t, http.MethodPatch, "/v1/wallets/alice", nil, `{"min_balance":null}`).RequireProblem(t, 422, "balance-below-minimum")

	var n int
	var detail string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*), min(detail::text) FILTER (WHERE detail->'after'->>'max_balance' = '1000') FROM audit_log
		 WHERE action = $1 AND target = 'alice' AND key_id IS NOT NULL`, postgres.ActionWalletLimits).Scan(&n, &detail))
	require.Equal(t, 2, n, "each change, and only a change, is audited")
	require.JSONEq(t, `{"before":{"min_balance":0,"max_balance":null},"after":{"min_balance":-100,"max_balance":1000}}`, detail)
}

func TestAForcedReversalTakesTheReceiverBelowItsMinimum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var orig struct {
		ID string `json:"id"`
	}
	res := b.transfer(t, "pay", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":500,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res.Decode(t, &orig)
	path := "/v1/transfers/" + orig.ID + "/reversal"
	writer := b.ownedKey(t, "writer", "", httpapi.ScopeTransfersWrite)
	b.as(t, writer, "f-0", http.MethodPost, path, `{"amount":100,"force":true}`).problem(t, http.StatusForbidden, "forbidden")

	// Bob holds the money: the force is not needed, and the reversal is a normal one.
	res = b.do(t, http.MethodPost, path, http.Header{"Idempotency-Key": {"f-1"}}, `{"amount":100,"force":true}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.NotContains(t, res.Body, `"forced"`)
	require.Equal(t, 0, b.audited(t, postgres.ActionForcedReversal))

	// Bob spends all of it but 30; without force the reversal is refused as before.
	res = b.transfer(t, "spend", `{"from_wallet_id":"bob","to_wallet_id":"alice","amount":370,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	b.do(t, http.MethodPost, path, http.Header{"Idempotency-Key": {"f-2"}}, `{"amount":400}`).RequireProblem(t, 422, "insufficient-funds")

	res = b.do(t, http.MethodPost, path, http.Header{"Idempotency-Key": {"f-3"}}, `{"amount":400,"force":true}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var forced struct {
		ID     string `json:"id"`
		Forced bool   `json:"forced"`
	}
	res.Decode(t, &forced)
	require.True(t, forced.Forced)
	require.Equal(t, limitsAnswer{Balance: -370, Available: -370, MinBalance: ptr(0), BelowMinimum: 370}, b.limits(t, "bob"))
	again := b.do(t, http.MethodPost, path, http.Header{"Idempotency-Key": {"f-3"}}, `{"amount":400,"force":true}`)
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))
	require.JSONEq(t, res.Body, again.Body)
	b.do(t, http.MethodPost, path, http.Header{"Idempotency-Key": {"f-3"}}, `{"amount":400}`).RequireProblem(t, 422, "idempotency-key-reused")

	var keyID uuid.UUID
	var detail json.RawMessage
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT key_id, detail FROM audit_log WHERE action = $1 AND target = $2`, postgres.ActionForcedReversal, forced.ID).Scan(&keyID, &detail))
	require.NotEqual(t, uuid.Nil, keyID)
	require.JSONEq(t, fmt.Sprintf(`{"transfer_id":%q,"wallet_id":"bob","amount":400,"currency":"USD","below_minimum":370}`, orig.ID), string(detail))

	// Bob is below his minimum: he spends nothing, and another forced reversal would take him
	// further than its own amount below it.
	b.transfer(t, "spend-more", `{"from_wallet_id":"bob","to_wallet_id":"alice","amount":1,"currency":"USD"}`).RequireProblem(t, 422, "insufficient-funds")
	var second struct {
		ID string `json:"id"`
	}
	res = b.transfer(t, "pay-2", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":5,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res.Decode(t, &second)
	b.do(t, http.MethodPost, "/v1/transfers/"+second.ID+"/reversal", http.Header{"Idempotency-Key": {"f-4"}}, `{"amount":5,"force":true}`).RequireProblem(t, 422, "insufficient-funds")
	require.Equal(t, 1, b.audited(t, postgres.ActionForcedReversal))
	b.requireVerified(t)

	// The database keeps the floor too: bob may not go one unit further below his minimum than
	// the force took him (370), whatever writes to it.
	_, err := b.pool.Exec(context.Background(), `UPDATE wallets SET balance = -370 WHERE id = 'bob'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(context.Background(), `UPDATE wallets SET balance = -371 WHERE id = 'bob'`)
	require.ErrorContains(t, err, "wallets_floor")
}

func (b *testBundle) audited(t *testing.T, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n))
	return n
}

// requireVerified runs wallet verify's checks on the test's database: all pass.
func (b *testBundle) requireVerified(t *testing.T) {
	t.Helper()
	checks, err := postgres.Verify(context.Background(), b.pool, wallet.VerifyOptions{})
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failed, "%s: %v", c.Name, c.Sample)
	}
}

// invalid is the header of a request the test sends against the document on purpose.
func (b *testBundle) invalid(reason string) http.Header {
	return openapitest.Invalid(authtest.Bearer(b.key), reason)
}

func ptr(n int64) *int64 { return &n }
