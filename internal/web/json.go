package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

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

// Decode reads exactly one JSON value of type T from the body: unknown fields, values of the
// wrong type, trailing data and bodies over MaxBodyBytes are refused with a problem.Error.
func Decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		if err != nil {
			if tooLarge := decodeError(err); errors.Is(tooLarge, errBodyTooLarge) {
				return v, tooLarge
			}
		}
		return v, problem.Newf(errInvalidBody, "the body must hold one JSON value and nothing after it")
	}
	return v, nil
}

func decodeError(err error) error {
	var (
		maxErr    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &maxErr):
		return errBodyTooLarge
	case errors.Is(err, io.EOF):
		return problem.Newf(errInvalidBody, "the body is empty; it must be a JSON object")
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return problem.Newf(errInvalidBody, "field %q must be of JSON type %s", typeErr.Field, jsonType(typeErr))
		}
		return problem.Newf(errInvalidBody, "the body must be a JSON object")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return problem.Newf(errInvalidBody, "the body is not valid JSON")
	}
	// Unknown fields and the like: encoding/json's message names the field and is safe to show.
	return problem.Newf(errInvalidBody, "the body is not acceptable: %s", err.Error())
}

func jsonType(e *json.UnmarshalTypeError) string {
	switch e.Type.Kind().String() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "integer (within 64 bits)"
	case "bool":
		return "boolean"
	}
	return e.Type.Kind().String()
}
