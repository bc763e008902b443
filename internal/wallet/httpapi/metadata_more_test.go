package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// listPages follows a listing's next_cursor from path with pages of limit, as key, and returns
// the items of member ("wallets", "holds") in order.
func (b *testBundle) listPages(t *testing.T, key, path, member string, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for range 20 {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if cursor != "" {
			q.Set("after", cursor)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		res := b.as(t, key, "", "GET", path+sep+q.Encode(), "")
		require.Equal(t, http.StatusOK, res.status, res.body)
		var p map[string]json.RawMessage
		decode(t, res.body, &p)
		var items []map[string]any
		decode(t, string(p[member]), &items)
		all = append(all, items...)
		var next *string
		decode(t, string(p["next_cursor"]), &next)
		if next == nil {
			return all
		}
		cursor = *next
	}
	t.Fatalf("%s: more than 20 pages", path)
	return nil
}

func ids(items []map[string]any) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it["id"].(string))
	}
	return out
}

func TestWalletMetadataIsCreatedReplacedAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type withMetadata struct {
		ID         string            `json:"id"`
		MaxBalance *int64            `json:"max_balance"`
		Metadata   map[string]string `json:"metadata"`
	}
	res := b.do(t, http.MethodPost, "/v1/wallets", nil, `{"id":"shop-1","currency":"USD","metadata":{"customer":"c-9","tier":"gold"}}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var w withMetadata
	res.Decode(t, &w)
	require.Equal(t, map[string]string{"customer": "c-9", "tier": "gold"}, w.Metadata)
	read := func() withMetadata {
		res := b.do(t, http.MethodGet, "/v1/wallets/shop-1", nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var w withMetadata
		res.Decode(t, &w)
		return w
	}
	require.Equal(t, w, read())

	patch := func(body string) webtest.Response {
		return b.do(t, http.MethodPatch, "/v1/wallets/shop-1", nil, body)
	}
	res = patch(`{"metadata":{"customer":"c-10"}}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, map[string]string{"customer": "c-10"}, read().Metadata, "the whole map is replaced")
	require.Equal(t, 1, b.audited(t, postgres.ActionWalletMetadata))
	require.Zero(t, b.audited(t, postgres.ActionWalletLimits), "the limits did not change")
	var detail string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT detail::text FROM audit_log WHERE action = $1`, postgres.ActionWalletMetadata).Scan(&detail))
	require.JSONEq(t, `{"before":{"customer":"c-9","tier":"gold"},"after":{"customer":"c-10"}}`, detail)

	res = patch(`{"max_balance":5000}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, map[string]string{"customer": "c-10"}, read().Metadata, "a change of limits leaves the metadata")
	require.Equal(t, 1, b.audited(t, postgres.ActionWalletMetadata))

	res = patch(`{"metadata":null,"max_balance":null}`)
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Contains(t, res.Body, `"metadata":{}`)
	require.Equal(t, withMetadata{ID: "shop-1", Metadata: map[string]string{}}, read())
	require.Equal(t, 2, b.audited(t, postgres.ActionWalletMetadata))
	require.Equal(t, 2, b.audited(t, postgres.ActionWalletLimits))

	t.Run("bad metadata are refused and change nothing", func(t *testing.T) {
		res := b.do(t, http.MethodPost, "/v1/wallets", b.invalid("a bad key"), `{"id":"shop-2","currency":"USD","metadata":{"a b":"1"}}`)
		require.Contains(t, res.RequireProblem(t, http.StatusBadRequest, "invalid-metadata").Detail, `key "a b"`)
		res = b.do(t, http.MethodPatch, "/v1/wallets/shop-1", b.invalid("a value not a string"), `{"metadata":{"k":1}}`)
		res.RequireProblem(t, http.StatusBadRequest, "invalid-metadata")
		require.Equal(t, 2, b.audited(t, postgres.ActionWalletMetadata))
		res = b.do(t, http.MethodPatch, "/v1/wallets/shop-1", b.invalid("no field"), `{}`)
		res.RequireProblem(t, http.StatusBadRequest, "invalid-request")
	})
}

func TestListWalletsNewestFirstByMetadataAndOwner(t *testing.T) {
	t.Parallel()
	b := setup(t) // mint, alice, bob, eve: without metadata, in that order
	for _, body := range []string{
		`{"id":"w1","currency":"USD","metadata":{"segment":"retail","region":"eu"}}`,
		`{"id":"w2","currency":"USD","metadata":{"segment":"retail","region":"us"}}`,
		`{"id":"w3","currency":"EUR","metadata":{"segment":"business","region":"eu"}}`,
		`{"id":"w4","currency":"USD","metadata":{"segment":"retail","region":"eu","vip":"yes"}}`,
	} {
		res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	acme := b.ownedKey(t, "acme", "acme", ownerScopes...)
	res := b.as(t, acme, "", "POST", "/v1/wallets", `{"id":"acme-1","currency":"USD","metadata":{"segment":"retail","region":"eu"}}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)

	for _, tt := range []struct {
		name, key, query string
		want             []string
	}{
		{"the platform sees every wallet, newest first", b.key, "", []string{"acme-1", "w4", "w3", "w2", "w1", "eve", "bob", "alice", "mint"}},
		{"one pair", b.key, "metadata[segment]=retail", []string{"acme-1", "w4", "w2", "w1"}},
		{"two pairs AND together", b.key, "metadata[segment]=retail&metadata[region]=eu", []string{"acme-1", "w4", "w1"}},
		{"a pair nobody gave lists none", b.key, "metadata[segment]=none", []string{}},
		{"an owner sees its own wallets alone", acme, "", []string{"acme-1"}},
		{"an owner's filter sees its own wallets alone", acme, "metadata[region]=eu", []string{"acme-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, limit := range []int{1, 2, 100} { // the cursor keeps the filter across pages
				require.Equal(t, tt.want, ids(b.listPages(t, tt.key, strings.TrimSuffix("/v1/wallets?"+tt.query, "?"), "wallets", limit)), "limit %d", limit)
			}
		})
	}

	t.Run("another owner's cursor names no wallet of this listing", func(t *testing.T) {
		t.Parallel()
		res := b.as(t, b.key, "", "GET", "/v1/wallets?limit=2", "") // acme-1, w4: the cursor names w4
		require.Equal(t, http.StatusOK, res.status, res.body)
		var p struct {
			NextCursor string `json:"next_cursor"`
		}
		decode(t, res.body, &p)
		res = b.as(t, acme, "", "GET", "/v1/wallets?after="+url.QueryEscape(p.NextCursor), "")
		res.problem(t, http.StatusBadRequest, "invalid-cursor")
		res = b.as(t, b.key, "", "GET", "/v1/wallets?after=bm90LWEtY3Vyc29y", "")
		res.problem(t, http.StatusBadRequest, "invalid-cursor")
	})
	t.Run("a key without wallets:read lists nothing", func(t *testing.T) {
		t.Parallel()
		reader := b.ownedKey(t, "transfers-only", "", "transfers:read")
		res := b.as(t, reader, "", "GET", "/v1/wallets", "")
		res.problem(t, http.StatusForbidden, "forbidden")
	})
	for _, tt := range []struct {
		query, slug  string
		beyondSchema bool
	}{
		{"metadata[segment]=", "invalid-metadata", true},
		{"metadata[a%20b]=1", "invalid-metadata", false},
		{"metadata=1", "invalid-query", false},
		{"owner=acme", "invalid-query", false},
	} {
		mark := openapitest.Invalid
		if tt.beyondSchema {
			mark = openapitest.Unchecked
		}
		b.do(t, http.MethodGet, "/v1/wallets?"+tt.query, mark(nil, "a bad wallet filter"), "").RequireProblem(t, 400, tt.slug)
	}
}

func TestHoldMetadataIsStoredFilteredAndCarriedToTheCapture(t *testing.T) {
	t.Parallel()
	b := setup(t) // alice holds 1000 USD
	type holdAnswer struct {
		ID                string            `json:"id"`
		Metadata          map[string]string `json:"metadata"`
		CaptureTransferID string            `json:"capture_transfer_id"`
	}
	place := func(key, metadata string) webtest.Response {
		return b.hold(t, http.MethodPost, "/v1/holds", key, fmt.Sprintf(`{"wallet_id":"alice","amount":10,"metadata":%s}`, metadata))
	}
	res := place("h-1", `{"order_id":"123","shop":"eu"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var h1 holdAnswer
	res.Decode(t, &h1)
	require.Equal(t, map[string]string{"order_id": "123", "shop": "eu"}, h1.Metadata)
	for i, m := range []string{`{"order_id":"124","shop":"eu"}`, `{"order_id":"123","shop":"us"}`, `{}`} {
		res := place(fmt.Sprintf("h-%d", i+2), m)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	res = b.hold(t, http.MethodGet, "/v1/holds/"+h1.ID, "", "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var read holdAnswer
	res.Decode(t, &read)
	require.Equal(t, h1, read)

	t.Run("the same key and metadata replay the hold; other metadata reuse the key", func(t *testing.T) {
		res := place("h-1", `{"shop":"eu","order_id":"123"}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
		place("h-1", `{"order_id":"123"}`).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
		b.hold(t, http.MethodPost, "/v1/holds", "h-1", `{"wallet_id":"alice","amount":10}`).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	})
	t.Run("bad metadata are refused", func(t *testing.T) {
		h := b.invalid("a bad key")
		h.Set("Idempotency-Key", "h-bad")
		b.do(t, http.MethodPost, "/v1/holds", h, `{"wallet_id":"alice","amount":10,"metadata":{"":"x"}}`).RequireProblem(t, http.StatusBadRequest, "invalid-metadata")
	})
	t.Run("the listing filters by metadata", func(t *testing.T) {
		for _, limit := range []int{1, 100} {
			got := b.listPages(t, b.key, "/v1/holds?metadata[order_id]=123", "holds", limit)
			require.Len(t, got, 2, "limit %d", limit)
			require.Equal(t, h1.ID, got[0]["id"])
			got = b.listPages(t, b.key, "/v1/holds?metadata[order_id]=123&metadata[shop]=eu", "holds", limit)
			require.Equal(t, []string{h1.ID}, ids(got))
			require.Len(t, b.listPages(t, b.key, "/v1/holds", "holds", limit), 4, "without a filter, every hold")
		}
		b.do(t, http.MethodGet, "/v1/holds?metadata[order_id]=", openapitest.Unchecked(nil, "an empty filter"), "").RequireProblem(t, 400, "invalid-metadata")
	})
	t.Run("the capture's transfer carries the hold's metadata", func(t *testing.T) {
		res := b.hold(t, http.MethodPost, "/v1/holds/"+h1.ID+"/capture", "cap-1", `{"to_wallet_id":"bob","amount":4}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		var captured holdAnswer
		res.Decode(t, &captured)
		require.Equal(t, h1.Metadata, captured.Metadata)
		res = b.do(t, http.MethodGet, "/v1/transfers/"+captured.CaptureTransferID, nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var tr struct {
			Metadata map[string]string `json:"metadata"`
		}
		res.Decode(t, &tr)
		require.Equal(t, h1.Metadata, tr.Metadata)
		got := b.listAll(t, b.key, "/v1/transfers?metadata[order_id]=123&metadata[shop]=eu", 100)
		require.Len(t, got, 1)
	})
}

func TestReversalMetadataIsStoredAnsweredAndReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.transfer(t, "pay-1", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":100,"currency":"USD","metadata":{"order_id":"123"}}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var paid struct{ ID string }
	res.Decode(t, &paid)
	reverse := func(key, body string) webtest.Response {
		return b.do(t, http.MethodPost, "/v1/transfers/"+paid.ID+"/reversal", http.Header{"Idempotency-Key": {key}}, body)
	}
	type reversal struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	res = reverse("undo-1", `{"amount":30,"metadata":{"case":"cb-9","reason":"damaged"}}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var r1 reversal
	res.Decode(t, &r1)
	want := map[string]string{"case": "cb-9", "reason": "damaged"}
	require.Equal(t, want, r1.Metadata, "the reversal's own, not the original's")

	res = reverse("undo-2", `{"amount":10}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Contains(t, res.Body, `"metadata":{}`)

	res = b.do(t, http.MethodGet, "/v1/transfers/"+paid.ID+"/reversals", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var list struct{ Reversals []reversal }
	res.Decode(t, &list)
	require.Len(t, list.Reversals, 2)
	require.Equal(t, r1, list.Reversals[0])
	require.Equal(t, map[string]string{}, list.Reversals[1].Metadata)

	res = reverse("undo-1", `{"metadata":{"reason":"damaged","case":"cb-9"},"amount":30}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
	reverse("undo-1", `{"amount":30}`).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	reverse("undo-1", `{"amount":30,"metadata":{"case":"cb-10"}}`).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")

	h := b.invalid("a value of 257 characters")
	h.Set("Idempotency-Key", "undo-bad")
	res = b.do(t, http.MethodPost, "/v1/transfers/"+paid.ID+"/reversal", h, fmt.Sprintf(`{"amount":1,"metadata":{"k":"%0257d"}}`, 0))
	res.RequireProblem(t, http.StatusBadRequest, "invalid-metadata")
	require.Equal(t, int64(60), b.balance(t, "bob"), "only the two reversals moved money")

	got := b.listAll(t, b.key, "/v1/transfers?metadata[case]=cb-9", 100)
	require.Len(t, got, 1, "the listing finds the reversal by its metadata")
}
