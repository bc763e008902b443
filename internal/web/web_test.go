package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/problem"
	"walletgl/internal/web"
	"walletgl/internal/web/webtest"
)

// serve runs one request through web.Handler around mux and returns the answer and the log.
func serve(t *testing.T, mux *http.ServeMux, req *http.Request) (*httptest.ResponseRecorder, []map[string]any) {
	t.Helper()
	var logs bytes.Buffer
	rec := httptest.NewRecorder()
	web.Handler(zerolog.New(&logs).Level(zerolog.DebugLevel), mux, nil).ServeHTTP(rec, req)
	var lines []map[string]any
	dec := json.NewDecoder(&logs)
	for dec.More() {
		var l map[string]any
		require.NoError(t, dec.Decode(&l))
		lines = append(lines, l)
	}
	return rec, lines
}

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		slug   string
		detail string
		logged string // the level it is logged at: info for a refusal, with its reason
	}{
		{"an invalid request is 400", problem.New(problem.Invalid, "invalid-x", "x is bad"), 400, "invalid-x", "x is bad", "info"},
		{"a missing thing is 404", problem.New(problem.NotFound, "x-not-found", "no x"), 404, "x-not-found", "no x", "info"},
		{"a conflict is 409", problem.New(problem.Conflict, "x-exists", "x exists"), 409, "x-exists", "x exists", "info"},
		{"a body over the limit is 413", problem.New(problem.TooLarge, "too-big", "too big"), 413, "too-big", "too big", "info"},
		{"a refusal of the rules is 422", problem.New(problem.Unprocessable, "no-funds", "no funds"), 422, "no-funds", "no funds", "info"},
		{"a wrapped application error keeps its slug and detail",
			fmt.Errorf("create x: %w", problem.New(problem.Conflict, "x-exists", "x exists")), 409, "x-exists", "x exists", "info"},
		{"a dependency that is down is 503, its cause logged only",
			fmt.Errorf("%w: read x: %w", problem.New(problem.Unavailable, "database-unavailable", "retry later"),
				errors.New("dial tcp 10.0.0.7:5432 user=secretuser database=secretdb")),
			503, "database-unavailable", "retry later", "warn"},
		{"an application error of kind internal is 500 and logged",
			problem.New(problem.Internal, "internal", "it broke"), 500, "internal", "it broke", "error"},
		{"any other error is 500 with a generic detail, logged",
			errors.New("pq: relation secretdb.x does not exist"), 500, "internal",
			"the server could not complete the request; it has been logged", "error"},
		{"a kind without a status is a bug: 500",
			problem.New(problem.Kind(99), "odd", "odd detail"), 500, "internal",
			"the server could not complete the request; it has been logged", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			mux.HandleFunc("GET /x", func(w http.ResponseWriter, r *http.Request) { web.WriteProblem(w, r, tt.err) })
			rec, logs := serve(t, mux, httptest.NewRequest(http.MethodGet, "/x", nil))
			p := webtest.Recorded(rec).RequireProblem(t, tt.status, tt.slug)
			require.Equal(t, tt.detail, p.Detail)
			require.Equal(t, "/x", p.Instance)
			if tt.status == http.StatusServiceUnavailable {
				require.Equal(t, web.UnavailableRetryAfter, rec.Header().Get("Retry-After"), "a 503 says when to try again")
			} else {
				require.Empty(t, rec.Header().Get("Retry-After"))
			}
			for _, secret := range []string{"secretuser", "secretdb", "10.0.0.7", "dial"} {
				require.NotContains(t, rec.Body.String(), secret)
			}
			var problemLogs []map[string]any
			for _, l := range logs {
				if l["message"] != "request" {
					problemLogs = append(problemLogs, l)
				}
			}
			require.Len(t, problemLogs, 1)
			require.Equal(t, tt.logged, problemLogs[0]["level"])
			require.NotEmpty(t, problemLogs[0]["request_id"])
			if tt.logged == "info" { // a refusal: the reason its client was given
				require.Equal(t, tt.slug, problemLogs[0]["problem"])
				require.Equal(t, tt.detail, problemLogs[0]["detail"])
				return
			}
			require.Equal(t, tt.err.Error(), problemLogs[0]["error"], "the whole error goes to the log")
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	type body struct {
		Name   string `json:"name"`
		Amount int64  `json:"amount"`
		Flag   bool   `json:"flag"`
	}
	const jsonType = "application/json"
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int // 0: decoded
		slug        string
		detail      string
	}{
		{"one object decodes", jsonType, `{"name":"a","amount":5}`, 0, "", ""},
		{"a utf-8 charset is fine", "application/json; charset=UTF-8", `{"name":"a"}`, 0, "", ""},
		{"whitespace after the object is fine", jsonType, "{\"name\":\"a\"}\n  ", 0, "", ""},
		{"a browser's text/plain form post is refused", "text/plain", `{"name":"a"}`, 415, "unsupported-media-type", `Content-Type "text/plain" is not application/json`},
		{"a url-encoded form is refused", "application/x-www-form-urlencoded", `name=a`, 415, "unsupported-media-type", ""},
		{"no content type is refused", "", `{"name":"a"}`, 415, "unsupported-media-type", "the request has no Content-Type; send application/json"},
		{"another charset is refused", "application/json; charset=latin1", `{"name":"a"}`, 415, "unsupported-media-type", `charset "latin1" is not utf-8`},
		{"an empty body is invalid", jsonType, ``, 400, "invalid-request", "the body is empty; it must be a JSON object"},
		{"malformed JSON is invalid", jsonType, `{"name":`, 400, "invalid-request", "the body is not one valid JSON value"},
		{"a syntax error is invalid", jsonType, `{"name" "a"}`, 400, "invalid-request", "the body is not one valid JSON value"},
		{"a duplicated field is invalid", jsonType, `{"amount":1,"amount":7}`, 400, "invalid-request", `field "amount" is given more than once`},
		{"a field differing only in case is invalid", jsonType, `{"name":"a","Amount":7}`, 400, "invalid-request", `field "Amount" is not known (names are case-sensitive)`},
		{"an unknown field is invalid", jsonType, `{"name":"a","memo":"x"}`, 400, "invalid-request", `field "memo" is not known (names are case-sensitive)`},
		{"a fraction for an integer is invalid", jsonType, `{"amount":1.5}`, 400, "invalid-request", `field "amount" must be a whole number within 64 bits`},
		{"an integer over 64 bits is invalid", jsonType, `{"amount":9223372036854775808}`, 400, "invalid-request", `field "amount" must be a whole number within 64 bits`},
		{"a string for a boolean is invalid", jsonType, `{"flag":"yes"}`, 400, "invalid-request", `field "flag" must be true or false`},
		{"an array is invalid", jsonType, `[]`, 400, "invalid-request", "the body must be a JSON object"},
		{"a second value is invalid", jsonType, `{"name":"a"}{}`, 400, "invalid-request", "the body is not one valid JSON value"},
		{"trailing garbage is invalid", jsonType, `{"name":"a"} x`, 400, "invalid-request", "the body is not one valid JSON value"},
		{"a body over the limit is too large", jsonType, `{"name":"` + strings.Repeat("a", web.MaxBodyBytes) + `"}`, 413, "body-too-large", ""},
		{"trailing data over the limit is too large", jsonType, `{"name":"a"}` + strings.Repeat(" ", web.MaxBodyBytes) + "x", 413, "body-too-large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			got, err := web.Decode[body](rec, req)
			if tt.status == 0 {
				require.NoError(t, err)
				require.Equal(t, "a", got.Name)
				return
			}
			var appErr *problem.Error
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, tt.slug, appErr.Slug)
			if tt.detail != "" {
				require.Equal(t, tt.detail, appErr.Detail)
			}
			web.WriteProblem(rec, req, err)
			webtest.Recorded(rec).RequireProblem(t, tt.status, tt.slug)
		})
	}

	t.Run("a service's sentinel of the same slug matches", func(t *testing.T) {
		t.Parallel()
		req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{`))
		req.Header.Set("Content-Type", "application/json")
		_, err := web.Decode[body](httptest.NewRecorder(), req)
		require.ErrorIs(t, err, problem.New(problem.Invalid, "invalid-request", "the request is invalid"))
	})
}

func TestEncode(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	web.Encode(rec, httptest.NewRequest(http.MethodGet, "/x", nil), http.StatusCreated, map[string]int{"n": 1})
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"n":1}`, rec.Body.String())
}

func TestHandlerRoutesAndLogs(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		// A handler adds a request-scoped field to the logger in the context.
		zerolog.Ctx(r.Context()).UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("thing_id", r.PathValue("id")) })
		web.Encode(w, r, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	})
	mux.HandleFunc("POST /things", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /silent", func(http.ResponseWriter, *http.Request) {})

	t.Run("a routed request is logged once with its route, status, duration and id", func(t *testing.T) {
		t.Parallel()
		req := httptest.NewRequest(http.MethodGet, "/things/7", nil)
		req.Header.Set("X-Request-Id", "req-42")
		rec, logs := serve(t, mux, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "req-42", rec.Header().Get("X-Request-Id"))
		require.Len(t, logs, 1)
		l := logs[0]
		require.Equal(t, "debug", l["level"])
		require.Equal(t, "request", l["message"])
		require.Equal(t, "req-42", l["request_id"])
		require.Equal(t, "GET", l["method"])
		require.Equal(t, "/things/7", l["path"])
		require.Equal(t, "GET /things/{id}", l["route"])
		require.Equal(t, float64(200), l["status"])
		require.Equal(t, "7", l["thing_id"], "fields a handler added ride on the request's line")
		require.Contains(t, l, "duration_ms")
	})

	t.Run("the status a handler sets is logged", func(t *testing.T) {
		t.Parallel()
		_, logs := serve(t, mux, httptest.NewRequest(http.MethodPost, "/things", nil))
		require.Equal(t, float64(http.StatusNoContent), logs[0]["status"])
	})

	t.Run("a handler that writes nothing has answered 200", func(t *testing.T) {
		t.Parallel()
		_, logs := serve(t, mux, httptest.NewRequest(http.MethodGet, "/silent", nil))
		require.Equal(t, float64(http.StatusOK), logs[0]["status"])
	})

	requestIDs := []struct {
		name, sent string
		kept       bool
	}{
		{"a sane request id is kept", "abc-123_X.y", true},
		{"a missing request id is made up", "", false},
		{"a request id with a space is replaced", "a b", false},
		{"a request id with a control character is replaced", "a\x01b", false},
		{"a request id over 128 characters is replaced", strings.Repeat("r", 129), false},
	}
	for _, tt := range requestIDs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodGet, "/things/1", nil)
			if tt.sent != "" {
				req.Header.Set("X-Request-Id", tt.sent)
			}
			rec, logs := serve(t, mux, req)
			got := rec.Header().Get("X-Request-Id")
			require.NotEmpty(t, got)
			require.Equal(t, tt.kept, got == tt.sent, got)
			require.Equal(t, got, logs[0]["request_id"])
		})
	}

	t.Run("an unknown path is a not-found problem", func(t *testing.T) {
		t.Parallel()
		rec, logs := serve(t, mux, httptest.NewRequest(http.MethodGet, "/nothing", nil))
		p := webtest.Recorded(rec).RequireProblem(t, http.StatusNotFound, "not-found")
		require.Equal(t, "/nothing", p.Instance)
		require.NotEmpty(t, rec.Header().Get("X-Request-Id"))
		require.Equal(t, float64(http.StatusNotFound), logs[0]["status"])
		require.Equal(t, "", logs[0]["route"])
	})

	t.Run("a wrong method is a method-not-allowed problem with Allow", func(t *testing.T) {
		t.Parallel()
		rec, logs := serve(t, mux, httptest.NewRequest(http.MethodDelete, "/things/1", strings.NewReader(`{"broken":`)))
		webtest.Recorded(rec).RequireProblem(t, http.StatusMethodNotAllowed, "method-not-allowed")
		require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
		require.Equal(t, float64(http.StatusMethodNotAllowed), logs[0]["status"])
	})

	t.Run("a path that is not canonical is still redirected", func(t *testing.T) {
		t.Parallel()
		rec, _ := serve(t, mux, httptest.NewRequest(http.MethodGet, "/things//1", nil))
		require.True(t, rec.Code >= 300 && rec.Code < 400, "status %d", rec.Code)
		require.Equal(t, "/things/1", rec.Header().Get("Location"))
		require.NotEqual(t, "application/problem+json", rec.Header().Get("Content-Type"))
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error {
		return errors.New("failed to connect to user=secretuser database=secretdb: dial tcp 10.0.0.7:5432: connection refused")
	}
	serveHealth := func(t *testing.T, checks ...web.Check) (*httptest.ResponseRecorder, []map[string]any) {
		t.Helper()
		mux := http.NewServeMux()
		mux.Handle("GET /healthz", web.Health(checks...))
		return serve(t, mux, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	}

	t.Run("passing checks answer ok", func(t *testing.T) {
		t.Parallel()
		rec, _ := serveHealth(t, web.Check{Name: "database", Func: ok}, web.Check{Name: "nats", Func: ok})
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
	})

	t.Run("a failing warning check answers ok and names the warning, its error only in the log", func(t *testing.T) {
		t.Parallel()
		rec, logs := serveHealth(t, web.Check{Name: "database", Func: ok}, web.Check{Name: "unauthenticated_events", Warn: true, Func: down})
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"status":"ok","checks":{"database":"ok","unauthenticated_events":"warning"}}`, rec.Body.String())
		require.NotContains(t, rec.Body.String(), "secretdb")
		require.Len(t, logs, 2)
		require.Equal(t, "warn", logs[0]["level"])
		require.Contains(t, logs[0]["error"], "secretdb", "the cause is logged")
	})

	t.Run("a warning does not hide a failure", func(t *testing.T) {
		t.Parallel()
		rec, _ := serveHealth(t, web.Check{Name: "database", Func: down}, web.Check{Name: "signing", Warn: true, Func: down})
		webtest.Recorded(rec).RequireProblem(t, http.StatusServiceUnavailable, "unavailable")
		var body struct {
			Checks map[string]string `json:"checks"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, map[string]string{"database": "unavailable", "signing": "warning"}, body.Checks)
	})

	t.Run("no checks answer ok", func(t *testing.T) {
		t.Parallel()
		rec, _ := serveHealth(t)
		require.Equal(t, http.StatusOK, rec.Code)
	})

	t.Run("a failing check answers 503 with a fixed detail, its error only in the log", func(t *testing.T) {
		t.Parallel()
		rec, logs := serveHealth(t, web.Check{Name: "database", Func: down}, web.Check{Name: "nats", Func: ok})
		p := webtest.Recorded(rec).RequireProblem(t, http.StatusServiceUnavailable, "unavailable")
		require.Equal(t, "the service cannot do its work now; retry later", p.Detail)
		require.Equal(t, web.UnavailableRetryAfter, rec.Header().Get("Retry-After"))
		var body struct {
			Checks map[string]string `json:"checks"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, map[string]string{"database": "unavailable", "nats": "ok"}, body.Checks)
		for _, secret := range []string{"secretuser", "secretdb", "10.0.0.7", "refused", "dial"} {
			require.NotContains(t, rec.Body.String(), secret)
		}
		require.Len(t, logs, 2)
		require.Equal(t, "warn", logs[0]["level"])
		require.Equal(t, "database", logs[0]["check"])
		require.Contains(t, logs[0]["error"], "secretdb", "the cause is logged")
	})
}
