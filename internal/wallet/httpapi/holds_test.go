package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

type holdAnswer struct {
	ID                string `json:"id"`
	Status            string `json:"status"`
	Amount            int64  `json:"amount"`
	CapturedAmount    int64  `json:"captured_amount"`
	CaptureTransferID string `json:"capture_transfer_id"`
	ToWalletID        string `json:"to_wallet_id"`
	VoidReason        string `json:"void_reason"`
}

func (b *testBundle) hold(t *testing.T, method, path, key, body string) webtest.Response {
	t.Helper()
	var header http.Header
	if key != "" {
		header = http.Header{"Idempotency-Key": {key}}
	}
	return b.do(t, method, path, header, body)
}

func TestHoldPlaceCapturePartOfItAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)

	res := b.hold(t, http.MethodPost, "/v1/holds", "h-1", `{"wallet_id":"alice","amount":600,"expires_in":3600}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var h holdAnswer
	res.Decode(t, &h)
	require.Equal(t, "pending", h.Status)
	again := b.hold(t, http.MethodPost, "/v1/holds", "h-1", `{"wallet_id":"alice","amount":600,"expires_in":3600}`)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotency-Replayed"))
	require.JSONEq(t, res.Body, again.Body)

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":1000,"held":600,"available":400,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
	b.transfer(t, "t-1", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":401,"currency":"USD"}`).
		RequireProblem(t, 422, "insufficient-funds")

	res = b.hold(t, http.MethodPost, "/v1/holds/"+h.ID+"/capture", "c-1", `{"to_wallet_id":"bob","amount":250}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var captured holdAnswer
	res.Decode(t, &captured)
	require.Equal(t, "captured", captured.Status)
	require.Equal(t, int64(250), captured.CapturedAmount)
	require.Equal(t, "bob", captured.ToWalletID)
	replay := b.hold(t, http.MethodPost, "/v1/holds/"+h.ID+"/capture", "c-1", `{"to_wallet_id":"bob","amount":250}`)
	require.Equal(t, http.StatusCreated, replay.Status, replay.Body)
	require.Equal(t, "true", replay.Header.Get("Idempotency-Replayed"))
	require.JSONEq(t, res.Body, replay.Body)

	res = b.do(t, http.MethodGet, "/v1/transfers/"+captured.CaptureTransferID, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var tr struct {
		HoldID string `json:"hold_id"`
		Amount int64  `json:"amount"`
	}
	res.Decode(t, &tr)
	require.Equal(t, h.ID, tr.HoldID)
	require.Equal(t, int64(250), tr.Amount)
	res = b.do(t, http.MethodGet, "/v1/holds/"+h.ID, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":750,"held":0,"available":750,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
}

func TestHoldRefusalsAndVoid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.hold(t, http.MethodPost, "/v1/holds", "h-1", `{"wallet_id":"alice","amount":100,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var h holdAnswer
	res.Decode(t, &h)
	unknown := "0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70"

	tests := []struct {
		name, path, key, body string
		status                int
		slug                  string
		invalid               bool
	}{
		{"more than available", "/v1/holds", "h-2", `{"wallet_id":"alice","amount":901}`, 422, "insufficient-funds", false},
		{"another currency", "/v1/holds", "h-3", `{"wallet_id":"alice","amount":1,"currency":"EUR"}`, 422, "currency-mismatch", false},
		{"an unknown wallet", "/v1/holds", "h-4", `{"wallet_id":"nobody","amount":1}`, 404, "wallet-not-found", false},
		{"the same key with another amount", "/v1/holds", "h-1", `{"wallet_id":"alice","amount":101,"currency":"USD"}`, 422, "idempotency-key-reused", false},
		{"a zero amount", "/v1/holds", "h-5", `{"wallet_id":"alice","amount":0}`, 400, "invalid-request", true},
		{"a currency that is no ISO 4217 code", "/v1/holds", "h-7", `{"wallet_id":"alice","amount":1,"currency":"ZZZ"}`, 400, "invalid-currency", false},
		{"both expiries", "/v1/holds", "h-6", `{"wallet_id":"alice","amount":1,"expires_in":60,"expires_at":"2099-01-01T00:00:00Z"}`, 400, "invalid-request", false},
		{"a capture beyond the hold", "/v1/holds/" + h.ID + "/capture", "c-1", `{"to_wallet_id":"bob","amount":101}`, 422, "capture-exceeds-hold", false},
		{"a capture to the hold's wallet", "/v1/holds/" + h.ID + "/capture", "c-2", `{"to_wallet_id":"alice"}`, 422, "same-wallet", false},
		{"a capture of an unknown hold", "/v1/holds/" + unknown + "/capture", "c-3", `{"to_wallet_id":"bob"}`, 404, "hold-not-found", false},
		{"an unknown hold", "/v1/holds/" + unknown, "", "", 404, "hold-not-found", false},
		{"a hold id that is no UUID", "/v1/holds/nope/void", "", "", 404, "hold-not-found", false},
	}
	for _, tt := range tests {
		method, header := http.MethodPost, http.Header{}
		if tt.key != "" {
			header.Set("Idempotency-Key", tt.key)
		}
		if tt.body == "" && tt.key == "" && tt.path == "/v1/holds/"+unknown {
			method = http.MethodGet
		}
		if tt.invalid {
			header = openapitest.Invalid(header, tt.name)
		}
		b.do(t, method, tt.path, header, tt.body).RequireProblem(t, tt.status, tt.slug)
	}

	res = b.do(t, http.MethodPost, "/v1/holds/"+h.ID+"/void", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var voided holdAnswer
	res.Decode(t, &voided)
	require.Equal(t, "voided", voided.Status)
	require.Equal(t, "requested", voided.VoidReason)
	again := b.do(t, http.MethodPost, "/v1/holds/"+h.ID+"/void", nil, "")
	require.Equal(t, http.StatusOK, again.Status, again.Body)
	require.JSONEq(t, res.Body, again.Body, "a repeated void answers the hold as it is")
	b.hold(t, http.MethodPost, "/v1/holds/"+h.ID+"/capture", "c-4", `{"to_wallet_id":"bob"}`).RequireProblem(t, 409, "hold-not-pending")

	// An expired hold cannot be captured, even before the expiry worker voids it.
	res = b.hold(t, http.MethodPost, "/v1/holds", "h-7", `{"wallet_id":"alice","amount":10,"expires_in":60}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var late holdAnswer
	res.Decode(t, &late)
	_, err := b.pool.Exec(context.Background(), "UPDATE holds SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1", late.ID)
	require.NoError(t, err)
	b.hold(t, http.MethodPost, "/v1/holds/"+late.ID+"/capture", "c-5", `{"to_wallet_id":"bob"}`).RequireProblem(t, 409, "hold-expired")

	res = b.do(t, http.MethodGet, "/v1/wallets/alice", nil, "")
	require.JSONEq(t, `{"id":"alice","currency":"USD","minor_units":2,"balance":1000,"held":10,"available":990,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`, res.Body)
}

// TestHoldsListPagesEveryHold lists holds as the GL's reconcile does: every status, oldest
// first, in pages, each answer checked against the OpenAPI document.
func TestHoldsListPagesEveryHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i, amount := range []int{100, 200, 300} {
		res := b.hold(t, http.MethodPost, "/v1/holds", "hl-"+strconv.Itoa(i), `{"wallet_id":"alice","amount":`+strconv.Itoa(amount)+`,"expires_in":3600}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		var h holdAnswer
		res.Decode(t, &h)
		ids = append(ids, h.ID)
	}
	res := b.hold(t, http.MethodPost, "/v1/holds/"+ids[1]+"/capture", "hl-c", `{"to_wallet_id":"bob","amount":150}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	res = b.hold(t, http.MethodPost, "/v1/holds/"+ids[2]+"/void", "", "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)

	type page struct {
		Holds      []holdAnswer `json:"holds"`
		NextCursor *string      `json:"next_cursor"`
	}
	var (
		all    []holdAnswer
		cursor string
	)
	for range 10 {
		res := b.do(t, http.MethodGet, "/v1/holds?limit=2&after="+url.QueryEscape(cursor), nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var p page
		res.Decode(t, &p)
		require.NotNil(t, p.Holds, "an empty page is an empty list, not null")
		all = append(all, p.Holds...)
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	require.Len(t, all, 3)
	got := map[string]holdAnswer{}
	for i, h := range all {
		require.Equal(t, ids[i], h.ID, "oldest first")
		got[h.ID] = h
	}
	require.Equal(t, "pending", got[ids[0]].Status)
	require.Equal(t, "captured", got[ids[1]].Status)
	require.Equal(t, "bob", got[ids[1]].ToWalletID)
	require.Equal(t, int64(200), got[ids[1]].Amount)
	require.Equal(t, "voided", got[ids[2]].Status)

	invalid := openapitest.Invalid(nil, "a bad query string")
	b.do(t, http.MethodGet, "/v1/holds?limit=0", invalid, "").RequireProblem(t, 400, "invalid-limit")
	b.do(t, http.MethodGet, "/v1/holds?after=%21%21", nil, "").RequireProblem(t, 400, "invalid-cursor")
}
