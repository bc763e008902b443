package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/rs/zerolog"

	"walletgl/internal/problem"
)

// MaxBodyBytes bounds every request body: no request of either API comes near it.
const MaxBodyBytes = 1 << 20

// The problems of a body that Decode refuses. "invalid-request" is the slug the wallet's
// clients already know for any bad request; errors.Is matches these against a service's
// sentinel of the same slug.
var (
	errInvalidBody  = problem.New(problem.Invalid, "invalid-request", "the request body is not acceptable")
	errBodyTooLarge = problem.New(problem.TooLarge, "body-too-large",
		fmt.Sprintf("the request body is over %d bytes", MaxBodyBytes))
)

// Encode answers with v as JSON.
func Encode(w http.ResponseWriter, r *http.Request, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		// The status is sent; this is a client that went away, or a bug a test shows.
		zerolog.Ctx(r.Context()).Debug().Err(err).Msg("write response")
	}
}

// Decode reads exactly one JSON value of type T from a body sent as application/json. It
// decodes with encoding/json/v2 semantics (github.com/go-json-experiment/json), which refuse
// what a money API must not guess at: a name given twice ("amount":1,"amount":7), a name
// that differs from the field's only in case, an unknown name, a value of the wrong type or
// out of range, and anything after the value; and a string holding what PostgreSQL cannot
// store (\u0000, which decodes to NUL). Each is a problem.Error: 415 for another media
// type, 413 for a body over MaxBodyBytes, 400 for the rest.
func Decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	if err := requireJSON(r); err != nil {
		return v, err
	}
	err := jsonv2.UnmarshalRead(http.MaxBytesReader(w, r.Body, MaxBodyBytes), &v, jsonv2.RejectUnknownMembers(true))
	if err != nil {
		return v, decodeError(err)
	}
	if err := checkDecoded(reflect.ValueOf(&v), ""); err != nil {
		return v, err
	}
	return v, nil
}

// errMediaType refuses a body that is not declared JSON: a browser's form post (text/plain,
// application/x-www-form-urlencoded) must never be read as a request of this API.
var errMediaType = problem.New(problem.UnsupportedMediaType, "unsupported-media-type", "the request body must be application/json")

func requireJSON(r *http.Request) error {
	raw := r.Header.Get("Content-Type")
	mediaType, params, err := mime.ParseMediaType(raw)
	switch {
	case raw == "":
		return problem.Newf(errMediaType, "the request has no Content-Type; send application/json")
	case err != nil || mediaType != "application/json":
		return problem.Newf(errMediaType, "Content-Type %q is not application/json", raw)
	case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
		return problem.Newf(errMediaType, "charset %q is not utf-8", params["charset"])
	}
	return nil
}

func decodeError(err error) error {
	var (
		maxErr  *http.MaxBytesError
		semErr  *jsonv2.SemanticError
		syntErr *jsontext.SyntacticError
	)
	switch {
	case errors.As(err, &maxErr):
		return errBodyTooLarge
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && isEmpty(err):
		return problem.Newf(errInvalidBody, "the body is empty; it must be a JSON object")
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syntErr):
		return problem.Newf(errInvalidBody, "field %q is given more than once", fieldName(syntErr.JSONPointer))
	case errors.Is(err, jsonv2.ErrUnknownName) && errors.As(err, &semErr):
		return problem.Newf(errInvalidBody, "field %q is not known (names are case-sensitive)", fieldName(semErr.JSONPointer))
	case errors.As(err, &semErr) && semErr.JSONPointer != "":
		return problem.Newf(errInvalidBody, "field %q must be %s", fieldName(semErr.JSONPointer), goKind(semErr))
	case errors.As(err, &semErr):
		return problem.Newf(errInvalidBody, "the body must be a JSON object")
	}
	return problem.Newf(errInvalidBody, "the body is not one valid JSON value")
}

// isEmpty reports whether an unexpected end of input came before any value.
func isEmpty(err error) bool {
	var syntErr *jsontext.SyntacticError
	return !errors.As(err, &syntErr) || syntErr.ByteOffset == 0
}

// fieldName is the JSON pointer of a member without its leading slash ("/amount" → "amount").
func fieldName(p jsontext.Pointer) string { return strings.TrimPrefix(string(p), "/") }

func goKind(e *jsonv2.SemanticError) string {
	if e.GoType == nil {
		return "of another type"
	}
	switch e.GoType.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number within 64 bits"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "of JSON type " + e.GoType.Kind().String()
}
