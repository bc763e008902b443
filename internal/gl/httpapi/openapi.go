package httpapi

import (
	"bytes"
	_ "embed"
)

// openAPI is the API's OpenAPI 3.1 description, written by hand beside the handlers and served
// at GET /openapi.json. The package's tests check every request they send and every answer
// they get against it, so it cannot drift from what the handlers do.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.1 document (JSON).
func OpenAPI() []byte { return bytes.Clone(openAPI) }
