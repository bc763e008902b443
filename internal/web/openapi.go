package web

import (
	"net/http"
	"strconv"
)

// OpenAPI routes GET /openapi.json on mux: doc, the service's OpenAPI document, as it was
// built in. It is open like the probes: it says what the API is, nothing of its data.
func OpenAPI(mux Mux, doc []byte) {
	mux.Handle("GET /openapi.json", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		_, _ = w.Write(doc) // a client that went away is not worth an error
	}))
}
