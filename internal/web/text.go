package web

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf8"

	"walletgl/internal/problem"
)

// errInvalidPath refuses a path carrying text PostgreSQL cannot store: a NUL character or bytes
// that are not UTF-8 (a query string's is ErrInvalidQuery, a body's errInvalidBody).
var errInvalidPath = problem.New(problem.Invalid, "invalid-request", "the path is not acceptable")

const notText = "holds a NUL character or bytes that are not UTF-8"

// StorableText reports whether s is text PostgreSQL can store: valid UTF-8 without NUL.
func StorableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// checkText refuses a request whose path or query string, once decoded, is not storable text:
// every handler and every database query after it sees only text PostgreSQL accepts.
func checkText(r *http.Request) error {
	if !StorableText(r.URL.Path) {
		return problem.Newf(errInvalidPath, "the path %s", notText)
	}
	raw := r.URL.RawQuery
	if raw == "" {
		return nil
	}
	if !StorableText(raw) {
		return problem.Newf(ErrInvalidQuery, "the query string %s", notText)
	}
	// A malformed query string is left to Query, which names its fault.
	q, _ := url.ParseQuery(raw)
	return CheckValues(q)
}

// CheckValues refuses query or form values (names included) that are not storable text, as
// invalid-query.
func CheckValues(values url.Values) error {
	for name, vs := range values {
		if !StorableText(name) {
			return problem.Newf(ErrInvalidQuery, "a parameter name %s", notText)
		}
		for _, v := range vs {
			if !StorableText(v) {
				return problem.Newf(ErrInvalidQuery, "parameter %q %s", name, notText)
			}
		}
	}
	return nil
}

// checkDecoded refuses a decoded body holding a string (a map key included) that is not
// storable text. JSON's \u0000 decodes to a NUL, which no text column takes.
func checkDecoded(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.String:
		if !StorableText(v.String()) {
			return problem.Newf(errInvalidBody, "field %q %s", strings.TrimPrefix(path, "/"), notText)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkDecoded(v.Elem(), path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			if err := checkDecoded(v.Field(i), path+"/"+jsonName(t.Field(i))); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes, base64 in JSON
		}
		for i := range v.Len() {
			if err := checkDecoded(v.Index(i), fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key().Interface())
			if iter.Key().Kind() == reflect.String && !StorableText(key) {
				return problem.Newf(errInvalidBody, "a name in field %q %s", strings.TrimPrefix(path, "/"), notText)
			}
			if err := checkDecoded(iter.Value(), path+"/"+key); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return f.Name
	}
	return name
}
