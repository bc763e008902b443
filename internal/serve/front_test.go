package serve_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/serve"
	"walletgl/internal/web"
)

// runAPI runs serve.Run as a service does, over the probes and one route, until the test ends,
// and returns its address once it accepts connections.
func runAPI(t *testing.T, l serve.Listen) string {
	t.Helper()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.Addr = probe.Addr().String()
	require.NoError(t, probe.Close())
	mux := http.NewServeMux()
	web.Probes(mux)
	mux.HandleFunc("GET /v1/things", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, l, web.Handler(zerolog.Nop(), mux, nil), nil, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", l.Addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return l.Addr
}

func get(t *testing.T, c *http.Client, url, host string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	res, err := c.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

// Served over TLS, every answer carries Strict-Transport-Security: a route's, a probe's and a
// refusal's.
func TestEveryAnswerOverTLSCarriesHSTS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newCA(t, "test CA")
	certPEM, keyPEM := ca.issue(t, "127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	addr := runAPI(t, serve.Listen{CertFile: writeFile(t, dir, "api.crt", certPEM), KeyFile: writeFile(t, dir, "api.key", keyPEM)})
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.certPEM))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for path, status := range map[string]int{"/v1/things": http.StatusNoContent, "/livez": http.StatusOK, "/nowhere": http.StatusNotFound} {
		res := get(t, c, "https://"+addr+path, "")
		require.Equal(t, status, res.StatusCode, path)
		require.Equal(t, web.HSTS, res.Header.Get("Strict-Transport-Security"), path)
	}
}

// With allowed hosts, a request naming another Host is answered 421 host-not-allowed; the
// probes answer any Host. Plain HTTP sends no HSTS.
func TestOnlyAllowedHostsAreAnswered(t *testing.T) {
	t.Parallel()
	addr := runAPI(t, serve.Listen{AllowedHosts: serve.ParseHosts(" API.example.com , localhost")})
	c := &http.Client{}
	for _, host := range []string{"api.example.com", "API.EXAMPLE.COM:8443", "localhost"} {
		res := get(t, c, "http://"+addr+"/v1/things", host)
		require.Equal(t, http.StatusNoContent, res.StatusCode, host)
		require.Empty(t, res.Header.Get("Strict-Transport-Security"))
	}
	for _, host := range []string{"evil.example", addr, "api.example.com.evil.example"} {
		res := get(t, c, "http://"+addr+"/v1/things", host)
		require.Equal(t, http.StatusMisdirectedRequest, res.StatusCode, host)
		require.Equal(t, web.ContentTypeProblem, res.Header.Get("Content-Type"))
		var p web.Problem
		require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
		require.Equal(t, web.TypeBase+web.SlugHostNotAllowed, p.Type)
	}
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		require.Equal(t, http.StatusOK, get(t, c, "http://"+addr+path, "evil.example").StatusCode, path)
	}
}
