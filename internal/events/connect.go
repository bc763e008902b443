package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Connect connects to NATS at url (several URLs, comma-separated, for a cluster). It returns
// even when no server answers yet and reconnects without limit, so a service starts and serves
// while the broker is down; Healthy reports the state.
func Connect(ctx context.Context, url, name string, log zerolog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.Timeout(2*time.Second),
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
	)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", url, err)
	}
	return nc, nil
}

// Healthy reports why the connection cannot carry messages now, or nil.
func Healthy(nc *nats.Conn) error {
	if status := nc.Status(); status != nats.CONNECTED {
		return fmt.Errorf("nats is %s", status)
	}
	return nil
}
