// Package db holds the SQL of both services: goose migrations under schema/ (embedded here so
// the binaries carry them), the sqlc queries under queries/ and the runtime role's privileges
// under roles/.
package db

import (
	"embed"
	"io/fs"
)

//go:embed schema
var schema embed.FS

//go:embed queries
var queries embed.FS

//go:embed roles
var roles embed.FS

// Queries returns the sqlc query files, queries/<set>/*.sql, for tools that need the exact SQL
// the services run (the benchmark's pgbench scripts).
func Queries() fs.FS {
	sub, _ := fs.Sub(queries, "queries")
	return sub
}

// Migrations returns the goose migration set with the given name: "events" (outbox and inbox)
// and "auth" (API keys and audit), applied to both databases, "wallet" or "gl".
func Migrations(set string) (fs.FS, error) {
	return fs.Sub(schema, "schema/"+set)
}

// Roles returns a file of roles/: the privileges the runtime role gets on what a migration set
// creates (roles/<set>.sql, where :"runtime_role" and :"database" stand for the role and the
// database, quoted identifiers), "reset", what every grant starts from, or "privileges", the
// check of a connection's user, or "server", the server's settings serve warns about.
func Roles(name string) (string, error) {
	b, err := roles.ReadFile("roles/" + name + ".sql")
	return string(b), err
}
