// Package metadata owns the key-value pairs a client attaches to a money movement (a transfer,
// in the wallet's API, its event and the GL's journal entry): their rules, their JSON form and
// the `metadata[<key>]=<value>` query parameters that filter listings by them. Both services
// use it, so the same pairs pass (or are refused) the same way everywhere.
package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"walletgl/internal/problem"
)

// ErrInvalid is the application error of metadata that breaks a rule below, in a request body
// or in a listing's filter; its detail names the fault.
var ErrInvalid = problem.New(problem.Invalid, "invalid-metadata", "the metadata is not acceptable")

// The rules of metadata.
const (
	MaxPairs       = 16   // key-value pairs at most
	MaxKeyLength   = 64   // characters of a key, each of A-Z, a-z, 0-9, _, . or -
	MaxValueLength = 256  // characters of a value (UTF-8, no control characters)
	MaxTotalLength = 4096 // bytes of all keys and values together
)

var keySyntax = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Metadata is a movement's key-value pairs; nil and empty are both "none".
type Metadata map[string]string

// Validate reports the first rule m breaks, in key order, as ErrInvalid naming the fault.
func (m Metadata) Validate() error {
	if len(m) > MaxPairs {
		return problem.Newf(ErrInvalid, "metadata holds %d pairs, at most %d are allowed", len(m), MaxPairs)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := validateKey(k); err != nil {
			return err
		}
		if err := validateValue(k, m[k]); err != nil {
			return err
		}
		total += len(k) + len(m[k])
	}
	if total > MaxTotalLength {
		return problem.Newf(ErrInvalid, "metadata keys and values total %d bytes, at most %d are allowed", total, MaxTotalLength)
	}
	return nil
}

func validateKey(k string) error {
	if !keySyntax.MatchString(k) {
		return problem.Newf(ErrInvalid, "metadata key %q must be 1 to %d characters of A-Z, a-z, 0-9, _, . or -", k, MaxKeyLength)
	}
	return nil
}

func validateValue(k, v string) error {
	if !utf8.ValidString(v) {
		return problem.Newf(ErrInvalid, "metadata value of key %q is not valid UTF-8", k)
	}
	if n := utf8.RuneCountInString(v); n > MaxValueLength {
		return problem.Newf(ErrInvalid, "metadata value of key %q has %d characters, at most %d are allowed", k, n, MaxValueLength)
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return problem.Newf(ErrInvalid, "metadata value of key %q holds a control character at byte %d", k, i)
	}
	return nil
}

// JSON is m as a JSON object, {} when m is empty: the form stored in jsonb columns and used
// as a containment filter (@>). encoding/json sorts the keys, so equal metadata encode alike.
func (m Metadata) JSON() []byte {
	if len(m) == 0 {
		return []byte("{}")
	}
	b, err := json.Marshal(map[string]string(m))
	if err != nil { // a map of strings always marshals
		panic(fmt.Sprintf("marshal metadata: %v", err))
	}
	return b
}

// Parse reads a stored JSON object of strings (JSON's output, a jsonb column); empty input
// is no metadata.
func Parse(b []byte) (Metadata, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	return m, nil
}

// Fields are m's keys and values in key order, for a fingerprint of the request m is part of.
func (m Metadata) Fields() []string {
	out := make([]string, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k, m[k])
	}
	return out
}

// QueryParameter is the name of the deepObject query parameter that filters a listing by
// metadata: `metadata[order_id]=123`.
const QueryParameter = "metadata"

// KeyOfParameter is the key a query parameter named `metadata[<key>]` filters on; ok is false
// for any other name. The key is not checked here (FromQuery does).
func KeyOfParameter(name string) (key string, ok bool) {
	rest, found := strings.CutPrefix(name, QueryParameter+"[")
	if !found {
		return "", false
	}
	key, found = strings.CutSuffix(rest, "]")
	if !found || strings.ContainsAny(key, "[]") {
		return "", false
	}
	return key, true
}

// FromQuery is the filter the `metadata[<key>]=<value>` parameters of q ask for: the
// movements whose metadata holds every pair (nil when q names none). Each pair obeys the
// rules of Validate, and a value may not be empty.
func FromQuery(q url.Values) (Metadata, error) {
	var m Metadata
	for _, name := range slices.Sorted(maps.Keys(q)) {
		key, ok := KeyOfParameter(name)
		if !ok {
			continue
		}
		if m == nil {
			m = Metadata{}
		}
		m[key] = q.Get(name)
		if m[key] == "" {
			return nil, problem.Newf(ErrInvalid, "filter %s must not be empty; leave it out to list every value", name)
		}
	}
	return m, m.Validate()
}

// FromJSON reads the "metadata" member of a request body: absent or null is none; anything
// but an object whose values are all strings, or pairs that break a rule of Validate, is
// ErrInvalid naming the fault.
func FromJSON(raw json.RawMessage) (Metadata, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, problem.Newf(ErrInvalid, "metadata must be a JSON object of strings")
	}
	m := make(Metadata, len(members))
	for _, k := range slices.Sorted(maps.Keys(members)) {
		var v string
		raw := bytes.TrimSpace(members[k])
		// null decodes into a string without an error: only a JSON string is a value.
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &v) != nil {
			return nil, problem.Newf(ErrInvalid, "metadata value of key %q must be a string", k)
		}
		m[k] = v
	}
	return m, m.Validate()
}
