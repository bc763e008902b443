package envtest

import (
	"net"
	"net/url"
	"testing"
)

// MultiHost returns dbURL, which names one server, as an HA deployment writes its URL: every
// server listed, a lost one first (its port refuses connections), and
// target_session_attrs=read-write so that the driver connects to the one that takes writes.
func MultiHost(t testing.TB, dbURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a port nobody listens on: %v", err)
	}
	lost := ln.Addr().String()
	_ = ln.Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse database url: %v", err)
	}
	u.Host = lost + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	return u.String()
}
