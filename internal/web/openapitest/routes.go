package openapitest

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web"
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

// unknownParameter is a query parameter no operation of either service takes.
const unknownParameter = "no_such_parameter"

// RequireStrictQueryStrings calls each of d's operations on the service at baseURL (every
// path parameter "x") with header (an API key that may call them all): a query parameter the
// operation does not list is refused with 400 invalid-query, before anything else is looked
// at; each parameter it lists, given alone with a value of its schema's type, is never
// refused as unknown (the handler may still find the value wrong for the resource).
func (d *Document) RequireStrictQueryStrings(t *testing.T, baseURL string, header http.Header, want int) {
	t.Helper()
	ops := d.Operations()
	require.Len(t, ops, want)
	for _, op := range ops {
		t.Run(op.Method+" "+op.Path, func(t *testing.T) {
			path := baseURL + pathParam.ReplaceAllString(op.Path, "x")
			res := webtest.Do(t, op.Method, path+"?"+unknownParameter+"=1", Invalid(header, "an unknown query parameter"), "")
			p := res.RequireProblem(t, http.StatusBadRequest, "invalid-query")
			require.Contains(t, p.Detail, unknownParameter)
			for name, value := range d.querySamples(op) {
				res := webtest.Do(t, op.Method, path+"?"+url.Values{name: {value}}.Encode(),
					Unchecked(header, "a documented parameter alone"), "")
				if res.Status == http.StatusBadRequest {
					var p web.Problem
					res.Decode(t, &p)
					require.NotEqual(t, web.TypeBase+"invalid-query", p.Type, "%s=%s: %s", name, value, p.Detail)
				}
			}
		})
	}
}

// querySamples is a value of each query parameter of op, of the type its schema declares.
func (d *Document) querySamples(op Operation) map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	item, ok := d.model.Paths.PathItems.Get(op.Path)
	if !ok {
		return nil
	}
	params := slices.Clone(item.Parameters)
	if o := item.GetOperations().GetOrZero(strings.ToLower(op.Method)); o != nil {
		params = append(params, o.Parameters...)
	}
	samples := map[string]string{}
	for _, p := range params {
		if p.In != "query" {
			continue
		}
		if p.Style == "deepObject" { // a member of the object: "metadata[x]=x"
			samples[p.Name+"[x]"] = "x"
			continue
		}
		samples[p.Name] = "x"
		if p.Schema == nil || p.Schema.Schema() == nil {
			continue
		}
		s := p.Schema.Schema()
		switch {
		case slices.Contains(s.Type, "integer"):
			samples[p.Name] = "1"
		case s.Format == "date-time":
			samples[p.Name] = "2026-01-02T15:04:05Z"
		case s.Format == "uuid":
			samples[p.Name] = "0193a5c2-7e41-7d7b-8f7e-2f4f7c1a9b10"
		case len(s.Enum) > 0:
			samples[p.Name] = s.Enum[0].Value
		}
	}
	return samples
}
