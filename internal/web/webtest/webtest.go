// Package webtest holds what tests of both services and of package web do with package web's
// answers: send a request, check a problem document, and check that a database's connection
// details never reach a client.
package webtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/web"
)

// UnreachableDatabaseURL names a database on a port where nothing listens: every use fails as
// in an outage, with an error naming the user, database and host that
// RequireNoConnectionDetails looks for.
const UnreachableDatabaseURL = "postgres://secretuser@127.0.0.1:1/secretdb?sslmode=disable&connect_timeout=2"

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Do sends method url with header and body and reads the whole answer. A POST, PUT or PATCH
// goes as application/json unless header says otherwise.
func Do(t testing.TB, method, url string, header http.Header, body string) Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(data)}
}

// Recorded is the answer rec holds.
func Recorded(rec *httptest.ResponseRecorder) Response {
	return Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

// ContentType is the answer's Content-Type.
func (r Response) ContentType() string { return r.Header.Get("Content-Type") }

// Decode parses the body into v.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(r.Body), v), r.Body)
}

// RequireProblem checks that the answer is a problem+json document with this status and slug,
// a title and a detail, and returns it.
func (r Response) RequireProblem(t testing.TB, status int, slug string) web.Problem {
	t.Helper()
	require.Equal(t, status, r.Status, r.Body)
	require.Equal(t, web.ContentTypeProblem, r.ContentType(), r.Body)
	var p web.Problem
	r.Decode(t, &p)
	require.Equal(t, web.TypeBase+slug, p.Type, r.Body)
	require.Equal(t, http.StatusText(status), p.Title)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Detail)
	return p
}

// RequireNoConnectionDetails checks that nothing of UnreachableDatabaseURL, nor a driver's
// error text, is in the body.
func (r Response) RequireNoConnectionDetails(t testing.TB) {
	t.Helper()
	for _, secret := range []string{"127.0.0.1", "secretuser", "secretdb", "dial", "refused", "pgx"} {
		require.NotContains(t, r.Body, secret, "connection details stay in the log")
	}
}

// RequireUnhealthy checks that the answer is a failing health check's: 503 "unavailable"
// naming each dependency as checks says, and nothing of why.
func (r Response) RequireUnhealthy(t testing.TB, checks map[string]string) {
	t.Helper()
	r.RequireProblem(t, http.StatusServiceUnavailable, web.SlugUnavailable)
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	r.Decode(t, &body)
	require.Equal(t, checks, body.Checks)
	r.RequireNoConnectionDetails(t)
}
