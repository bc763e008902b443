package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
)

// A password or token in any URL of the list never reaches an error or a log line.
func TestRedactURLHidesEveryPassword(t *testing.T) {
	t.Parallel()
	got := events.RedactURL("nats://gl:s3cret@n1:4222,nats://wallet:other@n2:4222,nats://n3:4222")
	require.NotContains(t, got, "s3cret")
	require.NotContains(t, got, "other")
	require.Contains(t, got, "n3:4222")
	require.NotContains(t, events.RedactURL("nats://gl:s3%zz@n1:4222"), "s3")
	require.Equal(t, "nats://xxxxx@n1:4222", events.RedactURL("nats://t0ken@n1:4222"), "a token in the user part")
}

// brokerWithUser starts an embedded nats-server that lets user in with password alone.
func brokerWithUser(t *testing.T, user, password string) (*server.Server, *server.Options) {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: user, Password: password}}}
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	return srv, opts
}

// setPassword reloads the broker with user's password changed, as an operator rotating it does.
func setPassword(t *testing.T, srv *server.Server, opts *server.Options, user, password string) {
	t.Helper()
	next := opts.Clone()
	next.Users = []*server.User{{Username: user, Password: password}}
	require.NoError(t, srv.ReloadOptions(next))
}

// Wrong credentials at start are an error that says so: serve exits instead of serving HTTP
// with a connection the broker closed for good.
func TestCredentialsTheBrokerRefusesAtStartAreAnError(t *testing.T) {
	t.Parallel()
	srv, _ := brokerWithUser(t, "wallet", "right")
	_, err := events.Broker{URL: srv.ClientURL(), Credentials: events.Credentials{User: "wallet", Password: "wrong"}}.
		Connect(context.Background(), "wallet", "wallet", zerolog.New(zerolog.NewTestWriter(t)))
	require.ErrorIs(t, err, events.ErrCredentialsRefused)
	require.ErrorContains(t, err, "Authorization Violation")
	require.NotContains(t, err.Error(), "wrong", "the password stays out of the error")
}

// A password rotated under a running service: the connection is not ready and says why, keeps
// trying instead of closing, and is ready again once the broker accepts the credentials.
func TestCredentialsRefusedLaterMakeTheConnectionUnreadyUntilAccepted(t *testing.T) {
	t.Parallel()
	srv, opts := brokerWithUser(t, "wallet", "right")
	nc, err := events.Broker{URL: srv.ClientURL(), Credentials: events.Credentials{User: "wallet", Password: "right"}}.
		Connect(context.Background(), "wallet", "wallet", zerolog.New(zerolog.NewTestWriter(t)))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, events.Healthy(nc))

	setPassword(t, srv, opts, "wallet", "rotated")
	require.Eventually(t, func() bool {
		return errors.Is(events.Healthy(nc), events.ErrCredentialsRefused)
	}, 30*time.Second, 20*time.Millisecond, "not ready, naming the refused credentials")
	// Refused twice in a row is where nats.go gives up by default: the connection must not close.
	require.Eventually(t, func() bool { return nc.Stats().Reconnects >= 2 || nc.IsClosed() }, 30*time.Second, 50*time.Millisecond)
	require.False(t, nc.IsClosed(), "the connection keeps retrying")

	setPassword(t, srv, opts, "wallet", "right")
	require.Eventually(t, func() bool { return events.Healthy(nc) == nil }, 60*time.Second, 50*time.Millisecond, "ready again")
}
