package openapitest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// spec is a service of one route, GET /things/{id}, with the components Handler needs for the
// answers to requests no operation describes.
const spec = `{
  "openapi": "3.1.0",
  "info": {"title": "things", "version": "1"},
  "paths": {
    "/things/{id}": {
      "get": {
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10}}
        ],
        "responses": {
          "200": {"description": "a thing", "content": {"application/json": {"schema": {
            "type": "object", "required": ["id", "count"], "additionalProperties": false,
            "properties": {"id": {"type": "string"}, "count": {"type": "integer"}}
          }}}},
          "404": {"$ref": "#/components/responses/NotFound"}
        }
      }
    }
  },
  "components": {
    "responses": {
      "NotFound": {"description": "nothing", "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
      "MethodNotAllowed": {
        "description": "another method",
        "headers": {"Allow": {"required": true, "schema": {"type": "string"}}},
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      }
    },
    "schemas": {
      "Problem": {
        "type": "object", "required": ["type", "status"], "additionalProperties": false,
        "properties": {"type": {"type": "string"}, "status": {"type": "integer"}}
      }
    }
  }
}`

func TestNewRefusesWhatIsNotAValidOpenAPI31Document(t *testing.T) {
	t.Parallel()
	_, err := openapitest.New([]byte(strings.Replace(spec, `"3.1.0"`, `"3.0.3"`, 1)))
	require.ErrorContains(t, err, "not 3.1")
	_, err = openapitest.New([]byte(strings.Replace(spec, `"info": {"title": "things", "version": "1"},`, "", 1)))
	require.ErrorContains(t, err, "not valid OpenAPI")
	_, err = openapitest.New([]byte(spec))
	require.NoError(t, err)
}

func TestOperations(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, []byte(spec))
	require.Equal(t, []openapitest.Operation{{Method: "GET", Path: "/things/{id}", Open: true}}, doc.Operations())
}

// answer is a stand-in service answering every request alike.
func answer(status int, contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET")
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

func TestHandler(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, []byte(spec))
	const (
		thing    = `{"id":"a","count":1}`
		notFound = `{"type":"not-found","status":404}`
	)
	tests := []struct {
		name        string
		method      string
		target      string
		header      http.Header
		service     http.Handler
		want        []string // in the failures; none: the exchange conforms
		wantMissing string   // not in the failures
	}{
		{"a conforming exchange", "GET", "/things/a?limit=2", nil, answer(200, "application/json", thing), nil, ""},
		{"a renamed field", "GET", "/things/a", nil, answer(200, "application/json", `{"id":"a","cont":1}`),
			[]string{"the answer does not conform", "cont"}, "the request"},
		{"an undocumented status", "GET", "/things/a", nil, answer(500, "application/json", `{}`),
			[]string{"the answer does not conform", "500"}, "the request"},
		{"a request out of range", "GET", "/things/a?limit=11", nil, answer(200, "application/json", thing),
			[]string{"the request does not conform", "limit"}, "the answer"},
		{"a request out of range, marked invalid", "GET", "/things/a?limit=11", openapitest.Invalid(nil, "limit"),
			answer(200, "application/json", thing), nil, ""},
		{"a valid request marked invalid", "GET", "/things/a", openapitest.Invalid(nil, "it is not"),
			answer(200, "application/json", thing), []string{"marked invalid (it is not), but the document accepts it"}, ""},
		{"a request marked unchecked is not checked", "GET", "/things/a?limit=11", openapitest.Unchecked(nil, "why"),
			answer(200, "application/json", thing), nil, ""},
		{"a request marked unchecked still has its answer checked", "GET", "/things/a", openapitest.Unchecked(nil, "why"),
			answer(200, "application/json", `{}`), []string{"the answer does not conform"}, "the request"},
		{"an unrouted path answered not found", "GET", "/nothing", openapitest.Invalid(nil, "no route"),
			answer(404, "application/problem+json", notFound), nil, ""},
		{"an unrouted path answered 200", "GET", "/nothing", openapitest.Invalid(nil, "no route"),
			answer(200, "application/json", thing), []string{"must be its NotFound response (status 404), not status 200"}, ""},
		{"an unrouted path, not marked", "GET", "/nothing", nil,
			answer(404, "application/problem+json", notFound), []string{"the request does not conform", "not found"}, "the answer"},
		{"an unrouted path answered with another problem shape", "GET", "/nothing", openapitest.Invalid(nil, "no route"),
			answer(404, "application/problem+json", `{"type":"not-found","status":404,"extra":1}`), []string{"NotFound", "extra"}, ""},
		{"an unrouted method answered 405", "DELETE", "/things/a", openapitest.Invalid(nil, "no method"),
			answer(405, "application/problem+json", `{"type":"method-not-allowed","status":405}`), nil, ""},
		{"an unrouted method answered 404", "DELETE", "/things/a", openapitest.Invalid(nil, "no method"),
			answer(404, "application/problem+json", notFound), []string{"MethodNotAllowed response (status 405), not status 404"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				failures openapitest.Failures
				marks    http.Header
			)
			server := httptest.NewServer(doc.Handler(&failures, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				marks = r.Header.Clone()
				tt.service.ServeHTTP(w, r)
			})))
			t.Cleanup(server.Close)
			webtest.Do(t, tt.method, server.URL+tt.target, tt.header, "")
			require.Empty(t, marks.Get(openapitest.InvalidHeader), "the service never sees a mark")
			require.Empty(t, marks.Get(openapitest.UncheckedHeader), "the service never sees a mark")
			got := strings.Join(failures.Take(), "\n")
			if tt.want == nil {
				require.Empty(t, got)
				return
			}
			for _, w := range tt.want {
				require.Contains(t, got, w)
			}
			if tt.wantMissing != "" {
				require.NotContains(t, got, tt.wantMissing)
			}
		})
	}
}

// The query string is checked beyond what the validator does: it must parse, and name only the
// operation's parameters, each once.
func TestCheckRequestQuery(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, []byte(spec))
	for target, want := range map[string]string{
		"/things/a?limit=2":         "",
		"/things/a?limit=2&sort=id": `query parameter "sort" is not one of the operation's`,
		"/things/a?limit=1&limit=2": `query parameter "limit" is given 2 times, but it is not an array`,
		"/things/a?limit=%zz":       "the query string does not parse",
		"/things/a?limit=1;limit=2": "the query string does not parse",
	} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodGet, target, nil)
			got := strings.Join(doc.CheckRequest(openapitest.Exchange{Request: req}), "\n")
			if want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, want)
		})
	}
}

// A Document is shared by a service's parallel tests: its checks, of the same component
// response at once, must be safe for concurrent use (libopenapi renders a schema for validation
// by writing into the model; under -race this test fails without the Document's lock).
func TestChecksAreSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t, []byte(spec))
	res := httptest.NewRecorder()
	res.Header().Set("Content-Type", "application/problem+json")
	res.WriteHeader(http.StatusNotFound)
	x := openapitest.Exchange{
		Request:      httptest.NewRequest(http.MethodGet, "/nothing", nil),
		Response:     res.Result(),
		ResponseBody: []byte(`{"type":"not-found","status":404}`),
	}
	const checkers = 8
	problems := make([][]string, checkers)
	var wg sync.WaitGroup
	for i := range checkers {
		wg.Go(func() {
			for range 20 {
				problems[i] = append(problems[i], doc.CheckResponse(x)...)
			}
		})
	}
	wg.Wait()
	for i := range checkers {
		require.Empty(t, problems[i], "a conforming NotFound answer, checked concurrently")
	}
}
