package events

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Connect connects to NATS at url (several URLs, comma-separated, for a cluster) with opts
// (credentials and TLS: Credentials.Options). It returns even when no server answers yet and
// reconnects without limit, so a service starts and serves while the broker is down; Healthy
// reports the state.
func Connect(ctx context.Context, url, name string, log zerolog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append([]nats.Option{
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.Timeout(2 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: we closed it
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ConnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats connected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn().Err(err).Msg("nats") // a permissions violation shows here
		}),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", RedactURL(url), err)
	}
	return nc, nil
}

// Credentials are how a service authenticates to NATS: at most one of a .creds file (JWT and
// NKey seed), an NKey seed file, a user and password, or a token; and TLS (a CA to verify the
// server, and a client certificate and key for mutual TLS). Secrets are never logged.
type Credentials struct {
	CredsFile, NKeySeedFile string
	User, Password, Token   string
	TLSCA, TLSCert, TLSKey  string
}

// Validate reports settings that do not go together.
func (c Credentials) Validate() error {
	n := 0
	for _, set := range []bool{c.CredsFile != "", c.NKeySeedFile != "", c.User != "", c.Token != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("NATS_CREDS, NATS_NKEY_SEED_FILE, NATS_USER and NATS_TOKEN are alternatives: set one")
	case c.Password != "" && c.User == "":
		return errors.New("NATS_PASSWORD needs NATS_USER")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("NATS_TLS_CERT and NATS_TLS_KEY go together: give both or neither")
	}
	return nil
}

// Options are the connection options of c.
func (c Credentials) Options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("NATS_NKEY_SEED_FILE: %w", err)
		}
		opts = append(opts, opt)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

// RedactURL hides the credentials (a password, or a token in the user part) of every URL in a
// NATS URL list (comma-separated), and the whole of one that does not parse but carries any.
func RedactURL(raw string) string {
	urls := strings.Split(raw, ",")
	for i, one := range urls {
		u, err := url.Parse(strings.TrimSpace(one))
		switch {
		case err != nil && strings.Contains(one, "@"):
			urls[i] = "(unparsable URL with credentials)"
		case err != nil || u.User == nil:
		case hasPassword(u.User):
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			urls[i] = u.String()
		default:
			u.User = url.User("xxxxx") // a token
			urls[i] = u.String()
		}
	}
	return strings.Join(urls, ",")
}

func hasPassword(u *url.Userinfo) bool {
	_, has := u.Password()
	return has
}

// Healthy reports why the connection cannot carry messages now, or nil.
func Healthy(nc *nats.Conn) error {
	if status := nc.Status(); status != nats.CONNECTED {
		return fmt.Errorf("nats is %s", status)
	}
	return nil
}
