package openapitest

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web/webtest"
)

// pathParam is a template parameter of a path, "{id}".
var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// RequireEveryOperationIsARoute calls each of d's operations on the service at baseURL (every
// path parameter "x"), after checking the document has want of them: an open operation must
// answer 200, any other must refuse a request without an API key with 401 unauthenticated. So
// every operation is a route of the service, behind its guard (the other way round, a route
// missing from the document, fails the test that calls it through Handler).
func (d *Document) RequireEveryOperationIsARoute(t *testing.T, baseURL string, want int) {
	t.Helper()
	ops := d.Operations()
	require.Len(t, ops, want)
	for _, op := range ops {
		t.Run(op.Method+" "+op.Path, func(t *testing.T) {
			path := pathParam.ReplaceAllString(op.Path, "x")
			if op.Open {
				res := webtest.Do(t, op.Method, baseURL+path, nil, "")
				require.Equal(t, http.StatusOK, res.Status, res.Body)
				return
			}
			res := webtest.Do(t, op.Method, baseURL+path, Invalid(nil, "no API key"), "")
			res.RequireProblem(t, http.StatusUnauthorized, "unauthenticated")
		})
	}
}
