package web

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"walletgl/internal/problem"
)

// HSTS is the Strict-Transport-Security a service served over TLS sends with every answer:
// browsers then refuse plain HTTP to its host for a year.
const HSTS = "max-age=31536000"

// SlugHostNotAllowed is the problem of a request naming a Host the service does not answer.
const SlugHostNotAllowed = "host-not-allowed"

var errHostNotAllowed = problem.New(problem.Misdirected, SlugHostNotAllowed, "this server does not answer for that host")

// probePaths answer any Host: an orchestrator probes a container by its address.
var probePaths = []string{"/livez", "/readyz", "/healthz"}

// Front is what a service's server puts before handler: with tls, Strict-Transport-Security on
// every answer; with hosts (lower case, without port), a request whose Host is none of them
// answered 421 host-not-allowed, the probes excepted.
func Front(handler http.Handler, tls bool, hosts []string) http.Handler {
	if !tls && len(hosts) == 0 {
		return handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tls {
			w.Header().Set("Strict-Transport-Security", HSTS)
		}
		if len(hosts) > 0 && !slices.Contains(probePaths, r.URL.Path) && !slices.Contains(hosts, hostName(r.Host)) {
			WriteProblem(w, r, errHostNotAllowed)
			return
		}
		handler.ServeHTTP(w, r)
	})
}

// hostName is a Host header's name, lower case, without its port or an IPv6 address's brackets.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}
