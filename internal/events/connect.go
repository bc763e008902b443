package events

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Connect connects to NATS at url (several URLs, comma-separated, for a cluster) with opts
// (credentials and TLS: Credentials.Options; the reply prefix: ReplyPrefix). A broker that
// refuses the credentials at the first attempt is an error (ErrCredentialsRefused): nothing
// would ever get through. Otherwise it returns even when no server answers yet and reconnects
// without limit, so a service starts and serves while the broker is down; Healthy reports the
// state. A broker that refuses the credentials later (a password rotated under a running
// service) is logged as an error and retried with a backoff from AuthRetryMin doubling to
// AuthRetryMax, never given up: the connection recovers once the credentials are right again.
func Connect(ctx context.Context, url, name string, log zerolog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	var conn atomic.Pointer[nats.Conn]
	var refusals atomic.Int64 // consecutive reconnect attempts the broker refused the credentials of
	base := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.IgnoreAuthErrorAbort(),
		nats.CustomReconnectDelay(func(int) time.Duration {
			if nc := conn.Load(); nc != nil && IsCredentialsRefused(nc.LastError()) {
				return authRetryDelay(int(refusals.Add(1)))
			}
			refusals.Store(0)
			return reconnectWait + rand.N(reconnectJitter)
		}),
		nats.Timeout(2 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: we closed it
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			refusals.Store(0)
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ConnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats connected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if IsCredentialsRefused(err) {
				log.Error().Err(err).Msg("nats: the broker refused the credentials; retrying with backoff (not ready until it accepts them)")
				return
			}
			log.Warn().Err(err).Msg("nats") // a permissions violation shows here
		}),
	}, opts...)
	nc, err := nats.Connect(url, base...)
	switch {
	case err == nil:
	case IsCredentialsRefused(err):
		return nil, fmt.Errorf("connect nats %s: %w: %w", RedactURL(url), ErrCredentialsRefused, err)
	default: // no broker answers yet: connect in the background
		log.Warn().Err(err).Str("url", RedactURL(url)).Msg("nats not reachable yet; connecting in the background")
		if nc, err = nats.Connect(url, append(base, nats.RetryOnFailedConnect(true))...); err != nil {
			return nil, fmt.Errorf("connect nats %s: %w", RedactURL(url), err)
		}
	}
	conn.Store(nc)
	return nc, nil
}

// How Connect waits between reconnect attempts: a short wait with jitter while no broker
// answers, a doubling one while a broker refuses the credentials.
const (
	reconnectWait   = 500 * time.Millisecond
	reconnectJitter = 250 * time.Millisecond
	AuthRetryMin    = time.Second
	AuthRetryMax    = 30 * time.Second
)

// authRetryDelay is the wait before the attempt after the n-th refusal in a row.
func authRetryDelay(n int) time.Duration {
	d := AuthRetryMin
	for i := 1; i < n && d < AuthRetryMax; i++ {
		d *= 2
	}
	return min(d, AuthRetryMax)
}

// ErrCredentialsRefused is the broker refusing the connection's credentials (an authorization
// violation, or expired or revoked credentials).
var ErrCredentialsRefused = errors.New("the broker refused the credentials (NATS_USER/NATS_PASSWORD, NATS_CREDS, NATS_NKEY_SEED_FILE or NATS_TOKEN)")

// IsCredentialsRefused reports whether err is the broker refusing the credentials.
func IsCredentialsRefused(err error) bool {
	return errors.Is(err, ErrCredentialsRefused) || errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// ReplyPrefix is the inbox prefix of the NATS user called user: replies to its requests (the
// JetStream API's answers, pulled messages) arrive on ReplyPrefix(user)+".>", the only subjects
// Topology.Permissions lets that user subscribe to, so no user reads another's replies.
func ReplyPrefix(user string) string { return "_INBOX_" + user }

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
		if err := nc.LastError(); IsCredentialsRefused(err) {
			return fmt.Errorf("nats is %s: %w: %w", status, ErrCredentialsRefused, err)
		}
		return fmt.Errorf("nats is %s", status)
	}
	return nil
}
