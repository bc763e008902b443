// Package db holds the SQL of both services: goose migrations under schema/ (embedded here so
// the binaries carry them) and the sqlc queries under queries/.
package db

import (
	"embed"
	"io/fs"
)

//go:embed schema
var schema embed.FS

// Migrations returns the goose migration set with the given name: "events" (outbox and inbox,
// applied to both databases), "wallet" or "gl".
func Migrations(set string) (fs.FS, error) {
	return fs.Sub(schema, "schema/"+set)
}
