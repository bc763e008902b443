package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web"
)

// A deepObject parameter takes any member name, metadata[<key>], and nothing else of its name.
func TestRoutesTakeTheMembersOfADeepObjectParameter(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"paths":{"/v1/things":{"get":{"parameters":[
		{"name":"limit","in":"query"},
		{"name":"metadata","in":"query","style":"deepObject","explode":true}]}}}}`)
	params, err := web.QueryParameters(doc)
	require.NoError(t, err)
	require.Equal(t, []string{"limit", "metadata[<key>]"}, params["GET /v1/things"])

	mux := http.NewServeMux()
	routes := web.MustRoutes(mux, doc)
	routes.Handle("GET /v1/things", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	for query, want := range map[string]int{
		"metadata[order_id]=1":               200,
		"metadata[order_id]=1&metadata[b]=2": 200,
		"limit=1&metadata[x]=y":              200,
		"metadata=1":                         400,
		"metadata[]=1":                       400,
		"metadata[a][b]=1":                   400,
		"limit[a]=1":                         400,
		"other[a]=1":                         400,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/things?"+query, nil))
		require.Equal(t, want, rec.Code, "%s: %s", query, rec.Body)
	}
}
