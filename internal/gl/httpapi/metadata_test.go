package httpapi_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/console"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
	"walletgl/internal/web/openapitest"
)

func TestEntriesShowAndFilterByMetadata(t *testing.T) {
	t.Parallel()
	tagged := func(transferID string, m metadata.Metadata) gl.Entry {
		e := entry(transferID, "USD", 100)
		e.Metadata = m
		return e
	}
	b := setup(t,
		tagged("0193a5c2-7e41-7d7b-8f7e-000000000001", metadata.Metadata{"order_id": "123", "shop": "eu"}),
		tagged("0193a5c2-7e41-7d7b-8f7e-000000000002", metadata.Metadata{"order_id": "124", "shop": "eu"}),
		tagged("0193a5c2-7e41-7d7b-8f7e-000000000003", nil),
		tagged("0193a5c2-7e41-7d7b-8f7e-000000000004", metadata.Metadata{"order_id": "123", "shop": "us <b>"}),
	)
	type page struct {
		Entries []struct {
			TransferID string            `json:"transfer_id"`
			Metadata   map[string]string `json:"metadata"`
		} `json:"entries"`
		NextCursor *string `json:"next_cursor"`
	}
	list := func(t *testing.T, query url.Values, limit string) []string {
		t.Helper()
		var all []string
		query = maps.Clone(query)
		for range 10 {
			query.Set("limit", limit)
			var p page
			status, _ := b.get(t, "/v1/entries?"+query.Encode(), &p)
			require.Equal(t, http.StatusOK, status)
			for _, e := range p.Entries {
				all = append(all, e.TransferID[len(e.TransferID)-1:])
			}
			if p.NextCursor == nil {
				return all
			}
			query.Set("after", *p.NextCursor)
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	for _, tt := range []struct {
		name  string
		query url.Values
		want  []string // the last digit of each transfer listed, in posting order
	}{
		{"no filter lists every entry", url.Values{}, []string{"1", "2", "3", "4"}},
		{"one pair", url.Values{"metadata[order_id]": {"123"}}, []string{"1", "4"}},
		{"two pairs AND together", url.Values{"metadata[order_id]": {"123"}, "metadata[shop]": {"eu"}}, []string{"1"}},
		{"a pair nobody gave lists none", url.Values{"metadata[order_id]": {"999"}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []string{"1", "100"} { // the cursor keeps the filter across pages
				require.Equal(t, tt.want, list(t, tt.query, limit), "limit %s", limit)
			}
		})
	}

	var one page
	status, _ := b.get(t, "/v1/entries?transfer_id=0193a5c2-7e41-7d7b-8f7e-000000000001", &one)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]string{"order_id": "123", "shop": "eu"}, one.Entries[0].Metadata)
	var none page
	b.get(t, "/v1/entries?transfer_id=0193a5c2-7e41-7d7b-8f7e-000000000003", &none)
	require.NotNil(t, none.Entries[0].Metadata, "an entry without metadata shows {}")
	require.Empty(t, none.Entries[0].Metadata)

	b.requireInvalid(t, "/v1/entries?metadata[order%20id]=1", 400, "invalid-metadata")
	b.requireInvalid(t, "/v1/entries?metadata=1", 400, "invalid-query")
	b.requireInvalid(t, "/v1/entries?metadata[a][b]=1", 400, "invalid-query")
	unchecked := openapitest.Unchecked(nil, "a rule the document cannot state")
	b.requireProblemWith(t, "/v1/entries?metadata[order_id]=", unchecked, 400, "invalid-metadata")
	b.requireProblemWith(t, "/v1/entries?transfer_id=0193a5c2-7e41-7d7b-8f7e-000000000001&metadata[order_id]=123", unchecked, 400, "invalid-query")

	t.Run("the console's entry page shows the metadata", func(t *testing.T) {
		c, err := console.New(console.Config{Service: "gl", Guard: b.guard, Metrics: metrics.New("gl"),
			Pages: httpapi.Books{Ledger: b.ledger, Scope: httpapi.ScopeLedgerRead}.Pages()})
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("/console/", c)
		srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
		t.Cleanup(srv.Close)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		login, err := browser.PostForm(srv.URL+"/console/login", url.Values{"key": {b.key}})
		require.NoError(t, err)
		login.Body.Close()
		require.Equal(t, http.StatusSeeOther, login.StatusCode)
		res, err := browser.Get(srv.URL + "/console/entries?id=0193a5c2-7e41-7d7b-8f7e-000000000004")
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		require.Contains(t, string(body), "<code>order_id</code> = <code>123</code>")
		require.Contains(t, string(body), "<code>shop</code> = <code>us &lt;b&gt;</code>", "values are escaped")
	})
}
