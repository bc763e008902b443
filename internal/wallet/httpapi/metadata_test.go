package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web/openapitest"
)

func TestTransferMetadataIsStoredAndAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type withMetadata struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	body := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD","metadata":{"order_id":"123","shop.region":"eu-1 ✓"}}`
	res := b.transfer(t, "meta-1", body)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var created withMetadata
	res.Decode(t, &created)
	want := map[string]string{"order_id": "123", "shop.region": "eu-1 ✓"}
	require.Equal(t, want, created.Metadata)

	var read withMetadata
	res = b.do(t, http.MethodGet, "/v1/transfers/"+created.ID, nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	res.Decode(t, &read)
	require.Equal(t, want, read.Metadata)

	t.Run("a transfer without metadata answers an empty object", func(t *testing.T) {
		res := b.transfer(t, "meta-none", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Contains(t, res.Body, `"metadata":{}`)
	})
	t.Run("the same key with the same metadata replays the transfer", func(t *testing.T) {
		res := b.transfer(t, "meta-1", `{"metadata":{"shop.region":"eu-1 ✓","order_id":"123"},"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD"}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
		var replayed withMetadata
		res.Decode(t, &replayed)
		require.Equal(t, created, replayed)
	})
	for _, tt := range []struct{ name, metadata string }{
		{"other metadata", `{"order_id":"124","shop.region":"eu-1 ✓"}`},
		{"a pair less", `{"order_id":"123"}`},
		{"no metadata", `{}`},
	} {
		t.Run("the same key with "+tt.name+" is a reused key", func(t *testing.T) {
			body := fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD","metadata":%s}`, tt.metadata)
			b.transfer(t, "meta-1", body).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
		})
	}
}

func TestTransferMetadataRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pairs := func(n int) string {
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf(`"k%d":"v"`, i))
		}
		return "{" + strings.Join(p, ",") + "}"
	}
	bigPairs := func(n int) string { // keys of 64 characters, values of 256
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf(`"%064d":"%s"`, i, strings.Repeat("v", 256)))
		}
		return "{" + strings.Join(p, ",") + "}"
	}
	for _, tt := range []struct {
		name, metadata, detail string
		beyondSchema           bool // a rule the document's schema cannot state
	}{
		{"more than 16 pairs", pairs(17), "17 pairs", false},
		{"an empty key", `{"":"v"}`, `key ""`, false},
		{"a key with a space", `{"order id":"1"}`, `key "order id"`, false},
		{"a key of 65 characters", fmt.Sprintf(`{"%s":"v"}`, strings.Repeat("k", 65)), "key", false},
		{"a value of 257 characters", fmt.Sprintf(`{"k":"%s"}`, strings.Repeat("é", 257)), "257 characters", false},
		{"a value with a control character", `{"k":"a\nb"}`, "control character", true},
		{"a value that is not a string", `{"k":1}`, "must be a string", false},
		{"metadata that is not an object", `["k","v"]`, "JSON object", false},
		{"pairs beyond 4096 bytes together", bigPairs(14), "4096", true},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			t.Parallel()
			body := fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":10,"currency":"USD","metadata":%s}`, tt.metadata)
			mark := openapitest.Invalid
			if tt.beyondSchema {
				mark = openapitest.Unchecked
			}
			res := b.do(t, http.MethodPost, "/v1/transfers",
				mark(http.Header{"Idempotency-Key": {"bad-" + tt.name}}, tt.name), body)
			p := res.RequireProblem(t, http.StatusBadRequest, "invalid-metadata")
			require.Contains(t, p.Detail, tt.detail)
		})
	}
	t.Run("16 pairs of the longest keys and values within 4096 bytes pass", func(t *testing.T) {
		t.Parallel()
		res := b.transfer(t, "meta-max", fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","metadata":%s}`, bigPairs(12)))
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		res = b.transfer(t, "meta-16", fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","metadata":%s}`, pairs(16)))
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	})
}

func TestListTransfersByMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t) // mint → alice 1000, without metadata
	moves := []struct{ to, ref, metadata string }{
		{"bob", "", `{"order_id":"123","shop":"eu"}`},
		{"bob", "rent", `{"order_id":"124","shop":"eu"}`},
		{"bob", "rent", `{"order_id":"123","shop":"us"}`},
		{"bob", "", `{}`},
		{"bob", "rent", `{"order_id":"123","shop":"eu","channel":"web"}`},
	}
	for i, m := range moves {
		body := fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":%q,"amount":10,"currency":"USD","reference":%q,"metadata":%s}`, m.to, m.ref, m.metadata)
		res := b.transfer(t, fmt.Sprintf("mm-%d", i), body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	refs := func(list []listedTransfer) []string {
		var out []string
		for _, tr := range list {
			out = append(out, tr.Reference)
		}
		return out
	}
	for _, tt := range []struct {
		name, query string
		want        []string // the references of the transfers listed, in order
		count       int
	}{
		{"one pair", "metadata[order_id]=123", nil, 3},
		{"two pairs AND together", "metadata[order_id]=123&metadata[shop]=eu", []string{"", "rent"}, 2},
		{"a pair with a reference", "metadata[order_id]=123&reference=rent", []string{"rent", "rent"}, 2},
		{"a pair with a wallet", "metadata[shop]=eu&wallet_id=bob", []string{"", "rent", "rent"}, 3},
		{"a pair nobody gave lists none", "metadata[order_id]=999", nil, 0},
		{"a key nobody gave lists none", "metadata[colour]=red", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, limit := range []int{1, 2, 100} { // the cursor keeps the filter across pages
				got := b.listAll(t, b.key, "/v1/transfers?"+tt.query, limit)
				require.Len(t, got, tt.count, "limit %d", limit)
				if tt.want != nil {
					require.Equal(t, tt.want, refs(got), "limit %d", limit)
				}
			}
		})
	}

	for _, tt := range []struct {
		query, slug  string
		beyondSchema bool // a rule the document's schema cannot state
	}{
		{"metadata[order_id]=", "invalid-metadata", true},
		{"metadata[order%20id]=1", "invalid-metadata", false},
		{"metadata[k]=" + url.QueryEscape(strings.Repeat("v", 257)), "invalid-metadata", false},
		{"metadata[a][b]=1", "invalid-query", false},
		{"metadata=1", "invalid-query", false},
		{"metadata[]=1", "invalid-query", true},
		{"wallet_id[x]=bob", "invalid-query", false},
		{"metadata[k]=1&metadata[k]=2", "invalid-query", false},
	} {
		mark := openapitest.Invalid
		if tt.beyondSchema {
			mark = openapitest.Unchecked
		}
		b.do(t, http.MethodGet, "/v1/transfers?"+tt.query, mark(nil, "a bad metadata filter"), "").RequireProblem(t, 400, tt.slug)
	}
}
