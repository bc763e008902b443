package console

import (
	"context"
	"net/http"

	"walletgl/internal/auth"
	"walletgl/internal/web"
)

// routes lists every route of the console: its own (login, logout, the pipeline header, the
// embedded assets) and the service's pages.
func (c *Console) routes() {
	c.mux.Handle("GET /console/login", c.handleLoginPage())
	c.mux.Handle("POST /console/login", c.handleLogin())
	c.mux.Handle("POST /console/logout", c.handle(Page{Func: c.logout}))
	c.mux.Handle("GET /console/pipeline", c.handle(Page{Func: c.pipelineFragment}))
	c.mux.Handle("GET /console/static/", staticFiles())
	for _, p := range c.cfg.Pages {
		c.mux.Handle(p.Pattern, c.handle(p))
	}
}

// logout ends the session; the key stays valid.
func (c *Console) logout(_ context.Context, req *Request) (View, error) {
	if cookie, err := req.Cookie(c.cookie); err == nil {
		c.sessions.delete(cookie.Value)
	}
	return View{Redirect: Prefix + "login"}, nil
}

// pipelineFragment is the pipeline header alone, which the script polls.
func (c *Console) pipelineFragment(ctx context.Context, _ *Request) (View, error) {
	return View{Template: "pipeline", Data: c.header(ctx)}, nil
}

// handleLoginPage shows the login form, or goes to the console when the session is live.
func (c *Console) handleLoginPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cookie, err := r.Cookie(c.cookie); err == nil {
			if _, ok := c.sessions.get(cookie.Value); ok {
				http.Redirect(w, r, Prefix, http.StatusSeeOther)
				return
			}
		}
		msg := ""
		if r.URL.Query().Has(sessionExpiredQ) {
			msg = "Your console session has ended. Enter the API key again."
		}
		c.renderLogin(w, r, http.StatusOK, msg)
	})
}

// handleLogin checks the key given in the form with the service's guard and starts a session:
// the key stays on the server, the browser gets an opaque id in an HttpOnly cookie.
func (c *Console) handleLogin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := sameOrigin(r); err != nil {
			c.renderError(w, r, nil, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		if err := r.ParseForm(); err != nil || web.CheckValues(r.PostForm) != nil {
			c.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
		secret := r.PostForm.Get("key")
		p, err := c.cfg.Guard.Authorize(auth.WithClient(r.Context(), r), secret, "")
		if err != nil {
			status, doc := web.ProblemOf(r, err)
			c.renderLogin(w, r, status, "Refused: "+doc.Detail)
			return
		}
		sess, err := c.sessions.create(secret, p.Name)
		if err != nil {
			c.renderError(w, r, nil, err)
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: c.cookie, Value: sess.id, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil,
			SameSite: http.SameSiteStrictMode,
		})
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	})
}
