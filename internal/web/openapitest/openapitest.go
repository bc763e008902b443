// Package openapitest holds a service's HTTP tests to its OpenAPI 3.1 document: Handler wraps
// the handler a test serves, and every request the test sends and every answer it gets is
// checked against the document (github.com/pb33f/libopenapi-validator), a mismatch failing the
// test with the validator's message. The document cannot drift from the handlers unnoticed.
//
// An answer is always checked: a documented route's against its operation (status, media type,
// body schema, headers), and an unrouted request's against the document's components
// NotFound (no path matches) and MethodNotAllowed (the path has no such method). A request is
// checked too, unless the test marks it as one it sends on purpose to be refused:
//
//   - Invalid: the document refuses it as well (a bad query parameter, a body against the
//     schema, no API key, a route that does not exist), and it must: a request marked invalid
//     that the document accepts fails the test, so a mark cannot hide a valid request and
//     each constraint the test relies on is known to be in the document.
//   - Unchecked: the document cannot say it is wrong (a name given twice in a JSON body);
//     only its answer is checked.
//
// Beyond what the validator checks, a request's query string must parse and name only the
// operation's parameters, each once unless it is an array.
package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// The request headers that mark a request as sent on purpose to be refused; their value says
// why. Handler takes them off before the service sees the request.
const (
	InvalidHeader   = "Openapitest-Invalid"
	UncheckedHeader = "Openapitest-Unchecked"
)

// Invalid returns header, or a new one, marking the request as one that breaks the document
// (see the package comment); why is shown when the document accepts it after all.
func Invalid(header http.Header, why string) http.Header { return mark(header, InvalidHeader, why) }

// Unchecked returns header, or a new one, marking the request as one whose fault the document
// cannot express: only its answer is checked.
func Unchecked(header http.Header, why string) http.Header {
	return mark(header, UncheckedHeader, why)
}

func mark(header http.Header, name, why string) http.Header {
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if why == "" {
		why = "(no reason given)"
	}
	h.Set(name, why)
	return h
}

// Document is an OpenAPI 3.1 document ready to check exchanges against. It is safe for
// concurrent use: its checks take turns, because libopenapi renders a schema for validation by
// writing into the shared model (a data race when parallel tests check answers at once).
type Document struct {
	mu        sync.Mutex // serializes every use of model, validator and schemas
	model     *v3.Document
	validator validator.Validator
	schemas   schema_validation.SchemaValidator
}

// options make the validator as strict as the document: formats (uuid, date-time, uri) are
// asserted, not just annotations.
func options() []config.Option {
	return []config.Option{config.WithFormatAssertions()}
}

// New parses spec, an OpenAPI 3.1 document, and checks it against the OpenAPI schema.
func New(spec []byte) (*Document, error) {
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		return nil, fmt.Errorf("the document is OpenAPI %q, not 3.1", v)
	}
	v, errs := validator.NewValidator(doc, options()...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("build the OpenAPI model: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the document is not valid OpenAPI:\n%s", describe(verrs))
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the OpenAPI model: %w", err)
	}
	return &Document{model: &model.Model, validator: v, schemas: schema_validation.NewSchemaValidator(options()...)}, nil
}

// Load is New for a test: a document that does not load fails t at once.
func Load(t testing.TB, spec []byte) *Document {
	t.Helper()
	d, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Operation is one method on one path of the document.
type Operation struct {
	Method string // GET, POST, …
	Path   string // the template: /v1/wallets/{id}
	Open   bool   // it needs no credentials (its security is empty)
}

// Operations lists every operation of the document, in its order.
func (d *Document) Operations() []Operation {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ops []Operation
	for path, item := range d.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			security := op.Security
			if security == nil {
				security = d.model.Security
			}
			open := len(security) == 0
			for _, req := range security {
				open = open || req.Requirements == nil || req.Requirements.Len() == 0
			}
			ops = append(ops, Operation{Method: strings.ToUpper(method), Path: path, Open: open})
		}
	}
	return ops
}

// Exchange is a request and the answer to it, each with its body read whole.
type Exchange struct {
	Request      *http.Request // its Body is not read: RequestBody is what was sent
	RequestBody  []byte
	Response     *http.Response // likewise: ResponseBody is what was answered
	ResponseBody []byte
}

// CheckRequest returns what the document says is wrong with x's request (nothing: it conforms).
// Beyond the validator's checks, the query string must parse, and name only parameters of the
// operation, each once unless it is an array: the validator lets the rest through.
func (d *Document) CheckRequest(x Exchange) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	req := x.request()
	_, errs := d.validator.ValidateHttpRequestSync(req)
	return append(describe(errs), d.checkQuery(req)...)
}

// checkQuery checks req's query string against the parameters of its operation; a request no
// operation describes is left to the validator, which reports it.
func (d *Document) checkQuery(req *http.Request) []string {
	item, errs, _ := paths.FindPath(req, d.model, nil)
	if item == nil || len(errs) > 0 || req.URL.RawQuery == "" {
		return nil
	}
	var params []*v3.Parameter
	params = append(params, item.Parameters...)
	if op := item.GetOperations().GetOrZero(strings.ToLower(req.Method)); op != nil {
		params = append(params, op.Parameters...)
	}
	declared := map[string]*v3.Parameter{}
	for _, p := range params {
		if p.In == "query" {
			declared[p.Name] = p
		}
	}
	var problems []string
	values, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		problems = append(problems, fmt.Sprintf("the query string does not parse: %v", err))
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		p, ok := declared[name]
		if base, _, found := strings.Cut(name, "["); !ok && found && strings.HasSuffix(name, "]") {
			// A deepObject parameter's member: "metadata[order_id]" of "metadata".
			if d, declaredBase := declared[base]; declaredBase && d.Style == "deepObject" {
				p, ok = d, true
			}
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("query parameter %q is not one of the operation's", name))
		case len(values[name]) > 1 && !isArray(p):
			problems = append(problems, fmt.Sprintf("query parameter %q is given %d times, but it is not an array", name, len(values[name])))
		}
	}
	return problems
}

func isArray(p *v3.Parameter) bool {
	return p.Schema != nil && p.Schema.Schema() != nil && slices.Contains(p.Schema.Schema().Type, "array")
}

// CheckResponse returns what the document says is wrong with x's answer (nothing: it
// conforms). The answer to a request no route matches must be the document's NotFound or
// MethodNotAllowed response.
func (d *Document) CheckResponse(x Exchange) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	req, res := x.request(), x.response()
	_, errs := d.validator.ValidateHttpResponse(req, res)
	for _, e := range errs {
		switch {
		case e.IsPathMissingError():
			return d.checkComponentResponse("NotFound", http.StatusNotFound, x)
		case e.IsOperationMissingError():
			return d.checkComponentResponse("MethodNotAllowed", http.StatusMethodNotAllowed, x)
		}
	}
	return describe(errs)
}

// checkComponentResponse checks x's answer against the document's response component name,
// the answer to a request no operation describes: its status, a required header, the media
// type and the body's schema.
func (d *Document) checkComponentResponse(name string, status int, x Exchange) []string {
	var (
		res      = x.response()
		problems []string
	)
	what := fmt.Sprintf("%s %s is in no operation of the document, so the answer must be its %s response",
		x.Request.Method, x.Request.URL.Path, name)
	want, ok := d.model.Components.Responses.Get(name)
	if !ok {
		return []string{what + ", but the document has no components.responses." + name}
	}
	if res.StatusCode != status {
		return []string{fmt.Sprintf("%s (status %d), not status %d", what, status, res.StatusCode)}
	}
	for header, h := range want.Headers.FromOldest() {
		if h.Required && res.Header.Get(header) == "" {
			problems = append(problems, fmt.Sprintf("%s: the header %s is required", what, header))
		}
	}
	mediaType, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	content, ok := want.Content.Get(mediaType)
	if err != nil || !ok {
		return append(problems, fmt.Sprintf("%s: Content-Type %q is not one it declares", what, res.Header.Get("Content-Type")))
	}
	if _, errs := d.schemas.ValidateSchemaBytes(content.Schema.Schema(), x.ResponseBody); len(errs) > 0 {
		problems = append(problems, what+":\n"+strings.Join(describe(errs), "\n"))
	}
	return problems
}

// request is x.Request reading RequestBody, for one validation.
func (x Exchange) request() *http.Request {
	r := x.Request.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	r.ContentLength = int64(len(x.RequestBody))
	return r
}

// response is x.Response reading ResponseBody, for one validation.
func (x Exchange) response() *http.Response {
	r := *x.Response
	r.Header = x.Response.Header.Clone()
	r.Body = io.NopCloser(bytes.NewReader(x.ResponseBody))
	return &r
}

// describe renders the validator's errors, each with what it found wrong in a schema.
func describe(errs []*liberrors.ValidationError) []string {
	var out []string
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			where := f.FieldPath
			if where == "" {
				where = f.KeywordLocation
			}
			s += fmt.Sprintf("\n\t%s: %s", where, f.Reason)
		}
		out = append(out, s)
	}
	return out
}

// Reporter hears what is wrong with an exchange: a *testing.T, or Failures.
type Reporter interface {
	Errorf(format string, args ...any)
}

// Failures collects what Handler reports, for a test that shows a mismatch is caught.
type Failures struct {
	mu   sync.Mutex
	list []string
}

// Errorf records one failure.
func (f *Failures) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
}

// Take returns the failures recorded so far and forgets them.
func (f *Failures) Take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := f.list
	f.list = nil
	return list
}

// Handler returns h checking every exchange against d: what is wrong is reported to t, which
// must outlive the requests (the test that starts the server). An answer reaches the client
// only once it is checked, so a failure is reported before the test's request returns.
func (d *Document) Handler(t Reporter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invalid, unchecked := r.Header.Get(InvalidHeader), r.Header.Get(UncheckedHeader)
		r.Header.Del(InvalidHeader)
		r.Header.Del(UncheckedHeader)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("openapitest: read the body of %s %s: %v", r.Method, r.URL, err)
			return
		}
		x := Exchange{Request: r.Clone(context.Background()), RequestBody: body}
		r.Body = io.NopCloser(bytes.NewReader(body))

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		x.Response, x.ResponseBody = rec.Result(), rec.Body.Bytes()

		exchange := fmt.Sprintf("%s %s → %d", r.Method, r.URL.RequestURI(), rec.Code)
		switch requestProblems := d.CheckRequest(x); {
		case invalid != "" && len(requestProblems) == 0:
			t.Errorf("openapitest: %s: the request is marked invalid (%s), but the document accepts it", exchange, invalid)
		case invalid == "" && unchecked == "" && len(requestProblems) > 0:
			t.Errorf("openapitest: %s: the request does not conform to the document:\n%s", exchange, strings.Join(requestProblems, "\n"))
		}
		if problems := d.CheckResponse(x); len(problems) > 0 {
			t.Errorf("openapitest: %s: the answer does not conform to the document:\n%s\nbody: %s",
				exchange, strings.Join(problems, "\n"), abbreviate(x.ResponseBody))
		}

		for k, vs := range x.Response.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(x.ResponseBody)
	})
}

// abbreviate is b, cut to what a failure message can show.
func abbreviate(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
