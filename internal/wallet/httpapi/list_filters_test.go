package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/wallet"
	"walletgl/internal/web/openapitest"
)

type listedTransfer struct {
	ID           string `json:"id"`
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Reference    string `json:"reference"`
}

// listAll pages through path (a /v1/transfers query) with key, limit at a time, and returns
// every transfer listed.
func (b *testBundle) listAll(t *testing.T, key, path string, limit int) []listedTransfer {
	t.Helper()
	var all []listedTransfer
	cursor := ""
	for range 20 {
		res := b.as(t, key, "", "GET", fmt.Sprintf("%s&limit=%d&after=%s", path, limit, url.QueryEscape(cursor)), "")
		require.Equal(t, http.StatusOK, res.status, res.body)
		var p struct {
			Transfers  []listedTransfer `json:"transfers"`
			NextCursor *string          `json:"next_cursor"`
		}
		decode(t, res.body, &p)
		all = append(all, p.Transfers...)
		if p.NextCursor == nil {
			return all
		}
		cursor = *p.NextCursor
	}
	t.Fatalf("%s: more than 20 pages", path)
	return nil
}

func TestListTransfersOfAWalletOrAReference(t *testing.T) {
	t.Parallel()
	b := setup(t) // mint → alice 1000
	for _, body := range []string{`{"id":"carol","currency":"USD"}`} {
		res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	moves := []struct{ from, to, ref string }{
		{"alice", "bob", "rent"}, {"bob", "carol", ""}, {"alice", "carol", "rent"},
		{"carol", "alice", "refund"}, {"alice", "bob", ""}, {"bob", "alice", "rent"},
	}
	for i, m := range moves {
		body := fmt.Sprintf(`{"from_wallet_id":%q,"to_wallet_id":%q,"amount":10,"currency":"USD","reference":%q}`, m.from, m.to, m.ref)
		res := b.transfer(t, fmt.Sprintf("m-%d", i), body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	ids := func(list []listedTransfer) []string {
		var out []string
		for _, tr := range list {
			out = append(out, tr.FromWalletID+">"+tr.ToWalletID+":"+tr.Reference)
		}
		return out
	}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"a wallet's transfers, either side, oldest first", "wallet_id=carol",
			[]string{"bob>carol:", "alice>carol:rent", "carol>alice:refund"}},
		{"a wallet's transfers include its funding", "wallet_id=alice",
			[]string{"mint>alice:", "alice>bob:rent", "alice>carol:rent", "carol>alice:refund", "alice>bob:", "bob>alice:rent"}},
		{"a reference's transfers", "reference=rent",
			[]string{"alice>bob:rent", "alice>carol:rent", "bob>alice:rent"}},
		{"a reference's transfers of one wallet", "reference=rent&wallet_id=carol",
			[]string{"alice>carol:rent"}},
		{"a wallet without transfers lists none", "wallet_id=nobody", nil},
		{"a reference nobody gave lists none", "reference=gift", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, limit := range []int{1, 2, 100} { // the cursor keeps the filter across pages
				require.Equal(t, tt.want, ids(b.listAll(t, b.key, "/v1/transfers?"+tt.query, limit)), "limit %d", limit)
			}
		})
	}

	invalid := openapitest.Invalid(nil, "a bad filter")
	b.do(t, http.MethodGet, "/v1/transfers?wallet_id=no%20spaces", invalid, "").RequireProblem(t, 400, "invalid-request")
	b.do(t, http.MethodGet, "/v1/transfers?wallet_id=", invalid, "").RequireProblem(t, 400, "invalid-query")
	b.do(t, http.MethodGet, "/v1/transfers?reference=", invalid, "").RequireProblem(t, 400, "invalid-query")
	b.do(t, http.MethodGet, "/v1/transfers?wallet=bob", invalid, "").RequireProblem(t, 400, "invalid-query")
}

// A key with an owner lists, of a wallet or a reference, only the transfers from or to its
// owner's wallets.
func TestListTransfersOfAWalletKeepsToTheOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acme := b.ownedKey(t, "acme", "acme", ownerScopes...)
	res := b.as(t, acme, "", "POST", "/v1/wallets", `{"id":"acme-1","currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.status, res.body)
	for i, body := range []string{
		`{"from_wallet_id":"alice","to_wallet_id":"acme-1","amount":5,"currency":"USD","reference":"inv-1"}`,
		`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":5,"currency":"USD","reference":"inv-1"}`,
	} {
		res := b.transfer(t, fmt.Sprintf("o-%d", i), body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	for _, query := range []string{"wallet_id=alice", "reference=inv-1", "wallet_id=acme-1"} {
		got := b.listAll(t, acme, "/v1/transfers?"+query, 1)
		require.Len(t, got, 1, query)
		require.Equal(t, "acme-1", got[0].ToWalletID, query)
	}
	require.Empty(t, b.listAll(t, acme, "/v1/transfers?wallet_id=bob", 10))
}

func TestListingCursorsAreValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acme := b.ownedKey(t, "acme", "acme", ownerScopes...)
	var page struct {
		Transfers []struct {
			ID        string `json:"id"`
			CreatedAt string `json:"created_at"`
		} `json:"transfers"`
	}
	res := b.do(t, http.MethodGet, "/v1/transfers", nil, "")
	decode(t, res.Body, &page)
	last := page.Transfers[len(page.Transfers)-1]
	createdAt, err := time.Parse(time.RFC3339Nano, last.CreatedAt)
	require.NoError(t, err)
	realCursor := wallet.Cursor{ID: uuid.MustParse(last.ID), CreatedAt: createdAt}
	past := realCursor
	past.CreatedAt = past.CreatedAt.AddDate(1, 0, 0) // a position after every transfer

	for _, path := range []string{"/v1/transfers", "/v1/transfers?wallet_id=alice&", "/v1/holds"} {
		p := path + "?"
		if strings.Contains(path, "?") {
			p = path
		}
		b.do(t, http.MethodGet, p+"after=not-a-cursor", nil, "").RequireProblem(t, 400, "invalid-cursor")
		b.do(t, http.MethodGet, p+"after="+past.String(), nil, "").RequireProblem(t, 400, "invalid-cursor")
	}
	// A transfer's cursor is valid for the platform; acme may not see that transfer.
	res = b.do(t, http.MethodGet, "/v1/transfers?after="+realCursor.String(), nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	b.as(t, acme, "", "GET", "/v1/transfers?after="+realCursor.String(), "").problem(t, 400, "invalid-cursor")
}
