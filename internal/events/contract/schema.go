package contract

import (
	"embed"
	"io/fs"
)

// schemas are the JSON Schemas (draft 2020-12) of each event type's data, one file per type
// and version: internal/events/contract/schema/<type>.json, described in docs/events.md. A test
// validates what the producers marshal against them, and that every type of the producers
// map has one.
//
//go:embed schema/*.json
var schemas embed.FS

// Schema returns the JSON Schema of eventType's data; found is false for a type without one.
func Schema(eventType string) (schema []byte, found bool) {
	b, err := fs.ReadFile(schemas, "schema/"+eventType+".json")
	return b, err == nil
}
