package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"walletgl/internal/problem"
	"walletgl/internal/wallet"
)

// maxBodyBytes bounds every request body: no request of this API comes near it.
const maxBodyBytes = 1 << 20

var errTooLarge = problem.New(problem.TooLarge, "body-too-large",
	fmt.Sprintf("the request body is over %d bytes", maxBodyBytes))

// encode answers with v as JSON.
func encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent; a client that went away is not worth an error.
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads exactly one JSON value of type T from the body: unknown fields, values of the
// wrong type, trailing data and bodies over maxBodyBytes are refused.
func decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		if err != nil {
			if tooLarge := decodeError(err); errors.Is(tooLarge, errTooLarge) {
				return v, tooLarge
			}
		}
		return v, problem.Newf(wallet.ErrInvalid, "the body must hold one JSON object and nothing after it")
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
		return errTooLarge
	case errors.Is(err, io.EOF):
		return problem.Newf(wallet.ErrInvalid, "the body is empty; it must be a JSON object")
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return problem.Newf(wallet.ErrInvalid, "field %q must be of JSON type %s", typeErr.Field, jsonType(typeErr))
		}
		return problem.Newf(wallet.ErrInvalid, "the body must be a JSON object")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return problem.Newf(wallet.ErrInvalid, "the body is not valid JSON")
	}
	// Unknown fields and the like: encoding/json's message names the field and is safe to show.
	return problem.Newf(wallet.ErrInvalid, "the body is not acceptable: %s", err.Error())
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
