// Package console is the operator console both services serve under /console/: server-rendered
// HTML pages (html/template; the stylesheet and a small script embedded, nothing fetched from
// elsewhere) over the same operator API the commands use (admin.Admin, the ledger's reader, the
// wallet's store), behind the service's API keys. A key is given once per browser session on
// the login page; the server keeps it and hands the browser only an opaque session id in an
// HttpOnly, SameSite=Strict cookie. Every request checks the key again with the service's guard
// (revocation, the page's scope, the rate limit), and every form that changes something carries
// the session's CSRF token and needs the admin scope of the matching HTTP or CLI operation.
//
// The outbox and inbox pages, the same in both services, are here (Events); each service adds
// its own pages beside its HTTP API (internal/wallet/httpapi Trace, internal/gl/httpapi Books),
// so that neither binary carries the other's code. Every page's template is in templates/.
package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/events/admin"
	"walletgl/internal/metrics"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// Prefix is where the console is served.
const Prefix = "/console/"

// Config is what a service gives its console.
type Config struct {
	Service string      // "wallet" or "gl": the title and the session cookie's name
	Guard   *auth.Guard // checks the session's key at every request
	Metrics *metrics.Metrics
	Pages   []Page // the service's pages, in the order of the navigation
	// RemoteTotals, when set, reads the other service's metrics for the pipeline header's
	// commit→posted latency (the wallet asks the GL, which records it).
	RemoteTotals func(ctx context.Context) (metrics.Totals, error)
	// Health, when set, counts the rows that need a look for every page's header (admin.Admin's
	// Health on the service's database).
	Health func(ctx context.Context) (admin.Health, error)
	// Remote, when set with RemoteTotals and Health, is the other service whose rows that need
	// a look the header shows beside this one's, read from its metrics (the wallet shows the
	// GL's; the GL never reads the wallet).
	Remote *Remote
}

// Remote names the other service in the header and says where its console is.
type Remote struct {
	Name string // the group's label: "GL"
	URL  string // its base URL (GL_URL): the badges link to its console's pages there
}

// Page is one route of the console: its pattern on the mux ("GET /console/outbox"), the scope
// its key must hold, its title in the navigation (none: not listed) and what it does.
type Page struct {
	Pattern string
	Scope   auth.Scope
	Nav     string // the navigation's label; "" keeps it out of the navigation
	Path    string // the navigation's link
	Func    PageFunc
	// ForOwners marks a page that shows a key with an owner only that owner's data; every
	// other page shows every owner's and refuses such a key (403).
	ForOwners bool
}

// PageFunc answers a console request: a view to render, or a redirect after a form.
type PageFunc func(ctx context.Context, req *Request) (View, error)

// Request is a console request once its session and scope are checked.
type Request struct {
	*http.Request
	Principal auth.Principal
	Form      url.Values // a POST's fields (its CSRF token checked); nil for a GET
}

// View is a page's answer: Template (a file of templates/) rendered with Data, or a redirect
// (303) to Redirect with Flash shown on the page it leads to.
type View struct {
	Template string
	Title    string
	Data     any
	Redirect string
	Flash    Flash
}

// Flash is the message an action leaves for the page after it, with its kind: a banner never
// shows a failure as a success.
type Flash struct {
	Kind FlashKind
	Text string
}

// FlashKind is how a flash message is shown: FlashDone (everything asked was done),
// FlashPartial (some of it was refused), FlashFailed (none of it was done).
type FlashKind string

const (
	FlashDone    FlashKind = "done"
	FlashPartial FlashKind = "partial"
	FlashFailed  FlashKind = "failed"
)

// flashOfCount is the kind of an action's message: done when all n asked for were done, failed
// when none was, partial otherwise.
func flashOfCount(done, n int) FlashKind {
	switch {
	case done == n:
		return FlashDone
	case done == 0:
		return FlashFailed
	}
	return FlashPartial
}

// Console is one service's console; it implements http.Handler for everything under Prefix.
type Console struct {
	cfg      Config
	sessions *sessions
	views    *views
	pipeline *pipeline
	mux      *http.ServeMux
	nav      []navLink
	cookie   string
}

type navLink struct {
	Label, Path string
}

// New returns the console of cfg.Service.
func New(cfg Config) (*Console, error) {
	v, err := parseViews()
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, sessions: newSessions(), views: v, mux: http.NewServeMux(),
		pipeline: newPipeline(cfg.Metrics, cfg.RemoteTotals), cookie: "walletgl_console_" + cfg.Service,
	}
	for _, p := range cfg.Pages {
		if p.Nav != "" {
			c.nav = append(c.nav, navLink{Label: p.Nav, Path: p.Path})
		}
	}
	c.routes()
	return c, nil
}

// ServeHTTP serves the console's routes; every answer carries headers that keep it from being
// framed, cached or fed scripts from elsewhere.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes a browser send Origin: null with forms
	if _, pattern := c.mux.Handler(r); pattern == "" {
		c.renderError(w, r, nil, problem.Newf(errNotFound, "there is no console page at %s", r.URL.Path))
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Run forgets ended sessions every minute until ctx ends: a worker of the service.
func (c *Console) Run(ctx context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.sessions.sweep()
		}
	}
}

// ErrInvalid is the problem of a request a page cannot answer as asked (its detail says why).
var ErrInvalid = errInvalid

// Problems of the console's own.
var (
	errNotFound    = problem.New(problem.NotFound, "not-found", "there is no such page")
	errInvalid     = problem.New(problem.Invalid, "invalid-request", "the request is not acceptable")
	errForbidden   = problem.New(problem.Forbidden, "forbidden", "the request was refused")
	errUnavailable = problem.New(problem.Unavailable, "unavailable", "the service's database cannot be reached now; retry later")
	errBadForm     = problem.New(problem.Invalid, "invalid-form", "the form could not be read")
)

// maxFormBytes bounds a form's body: the largest is a requeue of a page of ids.
const maxFormBytes = 64 << 10

// sessionExpiredQ is the login page's parameter saying a session ended.
const sessionExpiredQ = "expired"

// authorize finds the request's session and checks its key holds scope: the session and the
// principal, or the problem (auth.ErrUnauthenticated when there is no live session).
func (c *Console) authorize(r *http.Request, scope auth.Scope) (session, auth.Principal, error) {
	cookie, err := r.Cookie(c.cookie)
	if err != nil {
		return session{}, auth.Principal{}, problem.Newf(auth.ErrUnauthenticated, "log in with an API key")
	}
	sess, ok := c.sessions.get(cookie.Value)
	if !ok {
		return session{}, auth.Principal{}, problem.Newf(auth.ErrUnauthenticated, "the console session has ended; log in again")
	}
	p, err := c.cfg.Guard.Authorize(r.Context(), sess.secret, scope)
	if errors.Is(err, auth.ErrUnauthenticated) {
		c.sessions.delete(sess.id) // revoked: the session ends with the key
	}
	return sess, p, err
}

// handle wraps a page: session, scope, CSRF for a POST, then the page's view.
func (c *Console) handle(p Page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, principal, err := c.authorize(r, p.Scope)
		if err == nil && principal.Owner != "" && !p.ForOwners {
			err = problem.Newf(auth.ErrForbidden, "the API key %q acts for the owner %q: this page shows every owner's data", principal.Name, principal.Owner)
		}
		if err != nil {
			c.refuse(w, r, sess, err)
			return
		}
		log := zerolog.Ctx(r.Context()).With().Str("key_id", principal.KeyID.String()).Str("key_name", principal.Name).Logger()
		r = r.WithContext(auth.WithPrincipal(log.WithContext(r.Context()), principal))
		req := &Request{Request: r, Principal: principal}
		if r.Method == http.MethodPost {
			if req.Form, err = c.checkForm(w, r, sess); err != nil {
				c.renderError(w, r, &sess, err)
				return
			}
		}
		v, err := p.Func(r.Context(), req)
		if err != nil {
			c.renderError(w, r, &sess, err)
			return
		}
		if v.Redirect != "" {
			if v.Flash.Text != "" {
				c.sessions.setFlash(sess.id, v.Flash)
			}
			http.Redirect(w, r, v.Redirect, http.StatusSeeOther)
			return
		}
		c.render(w, r, &sess, http.StatusOK, v)
	})
}

// refuse answers a request without a usable session or scope: a page goes to the login page,
// a fragment (the script's poll) gets its status, anything else the error page.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, sess session, err error) {
	if errors.Is(err, auth.ErrUnauthenticated) && r.Method == http.MethodGet && !isFragment(r) {
		target := Prefix + "login"
		if _, cerr := r.Cookie(c.cookie); cerr == nil {
			target += "?" + sessionExpiredQ + "=1"
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	if sess.id == "" || errors.Is(err, auth.ErrUnauthenticated) {
		c.renderError(w, r, nil, err)
		return
	}
	c.renderError(w, r, &sess, err) // the layout keeps the navigation and the logout form
}

// checkForm reads a POST's form and checks it came from a console page of this session: the
// Origin (when the browser sends one) is this server, and the CSRF token is the session's.
func (c *Console) checkForm(w http.ResponseWriter, r *http.Request, sess session) (url.Values, error) {
	if err := sameOrigin(r); err != nil {
		return nil, err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return nil, problem.Newf(errBadForm, "the form could not be read")
	}
	if err := web.CheckValues(r.PostForm); err != nil {
		return nil, err
	}
	token := r.PostForm.Get("csrf")
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 {
		return nil, problem.Newf(errForbidden, "the form is not one this console session gave out; reload the page and try again")
	}
	return r.PostForm, nil
}

// sameOrigin refuses a POST whose Origin header names another site.
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" { // a browser that sends none; SameSite=Strict and the token still hold
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host {
		return problem.Newf(errForbidden, "the form was sent from another site")
	}
	return nil
}

// isFragment reports a request of the console's script for a part of a page.
func isFragment(r *http.Request) bool { return r.Header.Get(fragmentHeader) != "" }

// fragmentHeader marks the script's polls: the answer is the page's live part only.
const fragmentHeader = "X-Console-Fragment"

// flashOf returns the session's message once (a page after a redirect).
func (c *Console) flashOf(sess *session) Flash {
	if sess == nil {
		return Flash{}
	}
	return c.sessions.popFlash(sess.id)
}

// problemTitle is a problem's status as words.
func problemTitle(status int) string { return fmt.Sprintf("%d %s", status, http.StatusText(status)) }
