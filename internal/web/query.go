package web

import (
	"net/http"
	"net/url"
	"strconv"

	"walletgl/internal/problem"
)

// Problems of a query string, the same in both services.
var (
	ErrInvalidQuery = problem.New(problem.Invalid, "invalid-query", "the query string is not acceptable")
	ErrInvalidLimit = problem.New(problem.Invalid, "invalid-limit", "the limit parameter is out of range")
)

// Query parses the request's query string strictly: malformed percent-encoding, a ';' between
// parameters and a parameter given twice are refused rather than silently dropped or chosen
// from (net/http's r.URL.Query() drops what it cannot parse).
func Query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, problem.Newf(ErrInvalidQuery, "the query string does not parse: %s", err.Error())
	}
	for name, values := range q {
		if len(values) > 1 {
			return nil, problem.Newf(ErrInvalidQuery, "parameter %q is given %d times", name, len(values))
		}
	}
	return q, nil
}

// Limit reads the optional page size "limit": absent is def; a value that is not a whole
// number from 1 to max is refused (never quietly capped).
func Limit(q url.Values, def, max int) (int, error) {
	if !q.Has("limit") {
		return def, nil
	}
	raw := q.Get("limit")
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > max {
		return 0, problem.Newf(ErrInvalidLimit, "limit must be a whole number from 1 to %d, got %q", max, raw)
	}
	return n, nil
}
