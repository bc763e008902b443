package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/events"
	"walletgl/internal/money"
	"walletgl/internal/web"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticFiles serves the embedded stylesheet and script; they change only with the binary.
func staticFiles() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded directory is there at build time
	}
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// views is every page's template, each parsed with the layout.
type views struct {
	byName map[string]*template.Template
}

// layoutData is what the layout shows around a page.
type layoutData struct {
	Service  string
	Title    string
	User     string
	CSRF     string
	Nav      []navLink
	Path     string
	Flash    Flash
	Pipeline pipelineView
	Page     any
	LoggedIn bool
}

var funcs = template.FuncMap{
	"time":     formatTime,
	"timep":    func(t *time.Time) string { return formatTimePtr(t) },
	"age":      formatAge,
	"clip":     clip,
	"json":     prettyJSON,
	"deref":    func(p *int64) string { return derefInt(p) },
	"inc":      func(i int) int { return i + 1 },
	"contains": func(list []string, s string) bool { return contains(list, s) },
	"pathOnly": func(s string) string { p, _, _ := strings.Cut(s, "?"); return p },
	"money":    formatMoney,
	// requeuable: an outbox row of this status may be requeued.
	"requeuable": Requeuable,
	// attemptOf: a row's attempts against the relay's maximum, "attempt 4 of 10".
	"attemptOf": attemptOf,
	// The broker page's figures, formatted as the status command prints them.
	"bytes":      func(n uint64) string { return events.FormatBytes(int64(n)) },
	"limitBytes": events.FormatByteLimit,
	"limitCount": events.FormatCountLimit,
	"maxAge":     events.FormatMaxAge,
	"int64":      func(n int32) int64 { return int64(n) },
	// requeueOf is an event's requeue form's data: the session's CSRF token and the event.
	"requeueOf": func(csrf string, event any) requeueForm { return requeueForm{CSRF: csrf, Event: event} },
}

// requeueForm is what the event-requeue template shows a requeue form of.
type requeueForm struct {
	CSRF  string
	Event any
}

// attemptOf says how many of its publish attempts an outbox row used: "attempt 4 of 10", or
// "no attempt yet"; without a known maximum, the count alone.
func attemptOf(attempts int32, max int) string {
	switch {
	case attempts == 0:
		return "no attempt yet"
	case max > 0:
		return fmt.Sprintf("attempt %d of %d", attempts, max)
	}
	return fmt.Sprintf("attempt %d", attempts)
}

// formatMoney renders an amount in minor units (an int64, or a total that prints its digits,
// such as gl.Sum) in the major units of currency: USD 500 is 5.00, JPY 500 is 500.
func formatMoney(amount any, currency string) string {
	switch a := amount.(type) {
	case int64:
		return money.Format(a, currency)
	case fmt.Stringer:
		return money.FormatDigits(a.String(), currency)
	}
	return fmt.Sprint(amount)
}

func parseViews() (*views, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/pipeline.html", "templates/health.html", "templates/history.html", "templates/flash.html", "templates/event.html")
	if err != nil {
		return nil, fmt.Errorf("parse console layout: %w", err)
	}
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("list console templates: %w", err)
	}
	v := &views{byName: map[string]*template.Template{}}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" || name == "pipeline" || name == "health" || name == "history" || name == "flash" || name == "event" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, p)
		if err != nil {
			return nil, fmt.Errorf("parse console template %s: %w", name, err)
		}
		v.byName[name] = t
	}
	v.byName["pipeline"] = base
	return v, nil
}

// render answers with a page in the layout, or with its live part alone when the script asks.
func (c *Console) render(w http.ResponseWriter, r *http.Request, sess *session, status int, v View) {
	t, ok := c.views.byName[v.Template]
	if !ok {
		c.renderError(w, r, sess, fmt.Errorf("no console template %q", v.Template))
		return
	}
	var buf bytes.Buffer
	var err error
	switch {
	case v.Template == "pipeline":
		err = t.ExecuteTemplate(&buf, "pipeline", v.Data)
	case isFragment(r) && t.Lookup("live") != nil:
		err = t.ExecuteTemplate(&buf, "live", v.Data)
	default:
		err = t.ExecuteTemplate(&buf, "layout", c.layout(r, sess, v))
	}
	if err != nil {
		zerolog.Ctx(r.Context()).Error().Err(err).Str("template", v.Template).Msg("render console page")
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Error</title><p>The page could not be shown; the error has been logged.</p>")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a browser that went away is not worth an error
}

func (c *Console) layout(r *http.Request, sess *session, v View) layoutData {
	d := layoutData{Service: c.cfg.Service, Title: v.Title, Nav: c.nav, Path: r.URL.Path, Page: v.Data}
	if sess != nil && sess.id != "" {
		d.LoggedIn, d.User, d.CSRF, d.Flash = true, sess.keyName, sess.csrf, c.flashOf(sess)
		d.Pipeline = c.header(r.Context())
	}
	return d
}

// errorData is what the error page shows: the problem's public part, never a cause.
type errorData struct {
	Status int
	Title  string
	Detail string
	Type   string
}

// renderError answers with the problem of err as a page (a fragment gets the bare status).
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	status, doc := web.ProblemOf(r, err)
	if isFragment(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(doc.Detail))
		return
	}
	c.render(w, r, sess, status, View{Template: "error", Title: problemTitle(status),
		Data: errorData{Status: status, Title: problemTitle(status), Detail: doc.Detail, Type: doc.Type}})
}

// renderLogin shows the login form with a message (an error when status is not 200).
func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, nil, status, View{Template: "login", Title: "Log in", Data: struct {
		Message string
		Error   bool
	}{msg, status != http.StatusOK}})
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// formatAge is a duration as people read it: 850ms, 12s, 4m10s, 3h5m.
func formatAge(d time.Duration) string {
	switch {
	case d <= 0:
		return "none"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// prettyJSON indents a payload; anything that is not JSON is shown as it is.
func prettyJSON(raw any) string {
	var b []byte
	switch v := raw.(type) {
	case []byte:
		b = v
	case json.RawMessage:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Sprint(v)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

func derefInt(p *int64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprint(*p)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
