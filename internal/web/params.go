package web

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"walletgl/internal/problem"
)

// Mux is where routes are registered: an *http.ServeMux, or the Routes that put strict query
// strings before them.
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Routes registers a service's routes on a mux, each refusing a query string that names a
// parameter its operation in the service's OpenAPI document does not list (invalid-query):
// a parameter the handler would not read is an error the client should hear of, not a filter
// silently dropped. The document is the one list of each route's parameters, so the two
// cannot drift. A route the document does not describe (the console's HTML) is registered as
// it is. A parameter of style deepObject (`metadata`) is a family of names, `metadata[<key>]`
// for any key: the check takes each of them, and the handler reads and checks the keys.
type Routes struct {
	mux    *http.ServeMux
	params map[string][]string // "GET /v1/transfers" → the query parameters, sorted
}

var _ Mux = (*Routes)(nil)

// NewRoutes returns the routes of mux described by doc, an OpenAPI 3.1 document (JSON).
func NewRoutes(mux *http.ServeMux, doc []byte) (*Routes, error) {
	params, err := QueryParameters(doc)
	if err != nil {
		return nil, err
	}
	return &Routes{mux: mux, params: params}, nil
}

// MustRoutes is NewRoutes for a document built into the binary, which its tests load: one
// that does not parse is a bug.
func MustRoutes(mux *http.ServeMux, doc []byte) *Routes {
	r, err := NewRoutes(mux, doc)
	if err != nil {
		panic(err)
	}
	return r
}

// Handle registers handler for pattern ("GET /v1/transfers"), behind the check of the query
// parameters the document lists for it.
func (rs *Routes) Handle(pattern string, handler http.Handler) {
	allowed, ok := rs.params[pattern]
	if !ok {
		rs.mux.Handle(pattern, handler)
		return
	}
	rs.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkQueryNames(r, allowed); err != nil {
			WriteProblem(w, r, err)
			return
		}
		handler.ServeHTTP(w, r)
	}))
}

// checkQueryNames refuses a query string that does not parse strictly (Query) or names a
// parameter outside allowed.
func checkQueryNames(r *http.Request, allowed []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := Query(r)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if _, found := slices.BinarySearch(allowed, name); found {
			continue
		}
		if base, ok := deepObjectBase(name); ok {
			if _, found := slices.BinarySearch(allowed, base+deepObjectKey); found {
				continue
			}
		}
		if len(allowed) == 0 {
			return problem.Newf(ErrInvalidQuery, "%s takes no query parameters, got %q", r.URL.Path, name)
		}
		return problem.Newf(ErrInvalidQuery, "parameter %q is not one of %s", name, strings.Join(allowed, ", "))
	}
	return nil
}

// deepObjectKey follows the name of a deepObject parameter in the names QueryParameters
// returns: "metadata[<key>]" stands for every "metadata[k]".
const deepObjectKey = "[<key>]"

// deepObjectBase is the parameter a name of the form "base[key]" belongs to (key not empty,
// no bracket in either part); ok is false for any other name.
func deepObjectBase(name string) (base string, ok bool) {
	base, rest, found := strings.Cut(name, "[")
	if !found || base == "" {
		return "", false
	}
	key, found := strings.CutSuffix(rest, "]")
	if !found || key == "" || strings.ContainsAny(key, "[]") {
		return "", false
	}
	return base, true
}

// QueryParameters reads doc, an OpenAPI 3.1 document (JSON), into the query parameters of
// each operation, keyed by the mux pattern of its route ("GET /v1/transfers/{id}"): those of
// its path item and its own, a "$ref" resolved in components.parameters. A parameter of style
// deepObject is named with deepObjectKey after it ("metadata[<key>]").
func QueryParameters(doc []byte) (map[string][]string, error) {
	type parameter struct {
		Ref   string `json:"$ref"`
		Name  string `json:"name"`
		In    string `json:"in"`
		Style string `json:"style"`
	}
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]parameter `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	resolve := func(p parameter) (parameter, error) {
		if p.Ref == "" {
			return p, nil
		}
		name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
		c, found := d.Components.Parameters[name]
		if !ok || !found {
			return parameter{}, fmt.Errorf("read the OpenAPI document: parameter %q is not in components.parameters", p.Ref)
		}
		return c, nil
	}
	queryNames := func(raw json.RawMessage, into []string) ([]string, error) {
		var params []parameter
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, fmt.Errorf("read the OpenAPI document's parameters: %w", err)
		}
		for _, p := range params {
			p, err := resolve(p)
			if err != nil {
				return nil, err
			}
			switch {
			case p.In == "query" && p.Style == "deepObject":
				into = append(into, p.Name+deepObjectKey)
			case p.In == "query":
				into = append(into, p.Name)
			}
		}
		return into, nil
	}
	out := map[string][]string{}
	for path, item := range d.Paths {
		var common []string
		if raw, ok := item["parameters"]; ok {
			var err error
			if common, err = queryNames(raw, nil); err != nil {
				return nil, err
			}
		}
		for method, raw := range item {
			if !isOperation(method) {
				continue
			}
			var op struct {
				Parameters json.RawMessage `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("read the OpenAPI document's %s %s: %w", method, path, err)
			}
			names := slices.Clone(common)
			if op.Parameters != nil {
				var err error
				if names, err = queryNames(op.Parameters, names); err != nil {
					return nil, err
				}
			}
			slices.Sort(names)
			out[strings.ToUpper(method)+" "+path] = slices.Compact(names)
		}
	}
	return out, nil
}

// isOperation reports whether a path item's key is an HTTP method (not "parameters",
// "summary" and the like).
func isOperation(key string) bool {
	switch key {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}
