package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/web"
)

// textServer is a service's plumbing over one route that decodes a body and echoes what it
// read from the path, the query and the body: whatever reaches it must be storable text.
func textServer(t *testing.T, seen func(path, query, body string)) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		q, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		body, err := web.Decode[struct {
			Reference string            `json:"reference"`
			Tags      []string          `json:"tags"`
			Meta      map[string]string `json:"meta"`
		}](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		text := body.Reference + strings.Join(body.Tags, "")
		for k, v := range body.Meta {
			text += k + v
		}
		seen(r.PathValue("id"), q.Get("q"), text)
		w.WriteHeader(http.StatusNoContent)
	})
	return web.Handler(zerolog.Nop(), mux, nil)
}

// FuzzText sends any string in a path segment, a query parameter and JSON body strings. A
// request carrying what PostgreSQL cannot store (NUL, bytes that are not UTF-8) is refused 400
// as a problem before a handler sees it; whatever a handler sees is storable.
func FuzzText(f *testing.F) {
	for _, seed := range []string{"a", "a\x00b", "\x00", "\xff", "\xc3\x28", "é", "\u2028", "a\\u0000b", "%00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := textServer(t, func(path, query, body string) {
			for _, got := range []string{path, query, body} {
				require.True(t, web.StorableText(got), "a handler saw %q", got)
			}
		})
		body, err := json.Marshal(map[string]any{"reference": s, "tags": []string{s}, "meta": map[string]string{s: s}})
		require.NoError(t, err)
		// json.Marshal writes bytes that are not UTF-8 as U+FFFD: in the body only NUL remains.
		storable := web.StorableText(s)
		if strings.HasPrefix(s, "x") {
			return // the path target would be mistaken for the fixed one
		}
		for target, ok := range map[string]bool{
			"/v1/things/" + url.PathEscape(s) + "?q=a": storable,
			"/v1/things/x?q=" + url.QueryEscape(s):     storable,
			"/v1/things/x":                             !strings.ContainsRune(s, 0),
		} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			switch {
			case ok && strings.HasPrefix(target, "/v1/things/x"):
				require.Equal(t, http.StatusNoContent, rec.Code, "%s: %s", target, rec.Body)
				continue
			case ok: // the mux may redirect a path it cleans (".") or find no route ("/")
				require.Contains(t, []int{http.StatusNoContent, http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
					http.StatusMovedPermanently, http.StatusNotFound}, rec.Code, "%s: %s", target, rec.Body)
				continue
			}
			require.Equal(t, http.StatusBadRequest, rec.Code, "%s: %s", target, rec.Body)
			require.Equal(t, web.ContentTypeProblem, rec.Header().Get("Content-Type"))
		}
	})
}

func TestAPathOrQueryThatIsNotTextIsRefusedBeforeAnyHandler(t *testing.T) {
	t.Parallel()
	h := textServer(t, func(string, string, string) { t.Error("a handler was reached") })
	for target, slug := range map[string]string{
		"/v1/things/%00":      "invalid-request",
		"/v1/things/a%FFb":    "invalid-request",
		"/v1/things/x?q=%00":  "invalid-query",
		"/v1/things/x?q=%C3(": "invalid-query",
		"/v1/things/x?%00=1":  "invalid-query",
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusBadRequest, rec.Code, target)
		var p web.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Equal(t, web.TypeBase+slug, p.Type, target)
	}
}

// A body declared over the limit is answered 413 before it is read: a real client sending a
// large Content-Length reads the problem, not a reset connection.
func TestADeclaredBodyOverTheLimitIsAnswered413BeforeItIsRead(t *testing.T) {
	t.Parallel()
	h := textServer(t, func(string, string, string) { t.Error("a handler was reached") })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	declared := int64(web.MaxBodyBytes) * 64
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/things/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"reference\":\"", declared)
	require.NoError(t, err)
	// Nothing more of the body is sent: the answer must come without it.
	res, err := http.ReadResponse(bufioReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	require.Equal(t, web.ContentTypeProblem, res.Header.Get("Content-Type"))
	var p web.Problem
	require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
	require.Equal(t, web.TypeBase+"body-too-large", p.Type)

	// A client that sends the whole body at once reads the answer too.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/things/x", io.LimitReader(zeros{}, declared))
	require.NoError(t, err)
	req.ContentLength = declared
	req.Header.Set("Content-Type", "application/json")
	res2, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res2.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res2.StatusCode)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
