package envtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// RoleURL creates a login role for this test, named after it and holding no privilege, and
// returns dbURL (a database on ServerURL's server) connecting as that role. The role is dropped
// when the test ends, with whatever was granted to it in any database.
func RoleURL(t testing.TB, dbURL string) string {
	t.Helper()
	name := UniqueName(t, 40)
	var b [16]byte
	_, _ = rand.Read(b[:])
	password := hex.EncodeToString(b[:]) // for servers that ask for one; hex needs no quoting
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ServerURL(t))
	if err != nil {
		t.Fatalf("connect to create role: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatalf("create role %s: %v", name, err)
	}
	t.Cleanup(func() { dropRole(t, name) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse database url: %v", err)
	}
	u.User = url.UserPassword(name, password)
	return u.String()
}

// dropRole gives what role owns to the server's user and revokes what it holds, in every
// database where it has either (REASSIGN OWNED, DROP OWNED: both per database), then drops it.
func dropRole(t testing.TB, role string) {
	ctx := context.Background()
	server := ServerURL(t)
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Logf("drop role %s: %v", role, err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
SELECT DISTINCT d.datname FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid
WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = (SELECT oid FROM pg_roles WHERE rolname = $1)`, role)
	if err != nil {
		t.Logf("drop role %s: %v", role, err)
		return
	}
	databases, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("drop role %s: %v", role, err)
		return
	}
	// Databases are shared objects: REASSIGN and DROP OWNED in any database take them along.
	databases = append(databases, "postgres")
	ident := pgx.Identifier{role}.Sanitize()
	for _, name := range databases {
		u, err := url.Parse(server)
		if err != nil {
			t.Logf("drop role %s: %v", role, err)
			return
		}
		u.Path = "/" + name
		db, err := pgx.Connect(ctx, u.String())
		if err != nil {
			continue // dropped meanwhile
		}
		if _, err := db.Exec(ctx, "REASSIGN OWNED BY "+ident+" TO CURRENT_USER; DROP OWNED BY "+ident); err != nil {
			t.Logf("drop what role %s holds in %s: %v", role, name, err)
		}
		_ = db.Close(ctx)
	}
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident); err != nil {
		t.Logf("drop role %s: %v", role, err)
	}
}
