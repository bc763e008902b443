package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
)

// BrokerUsers checks what both binaries promise of the broker's users, for service, on a
// nats-server process that runs the users of docs/security.md (Topology.UserPermissions):
// serve exits naming the refused credentials when the password is wrong; serve as the
// service's own user refuses to start while the streams and its consumer are missing, naming
// them and `<service> events setup`; events setup as the operator's user creates them (and
// says unchanged the second time); then serve runs healthy as the service's user, which may
// not create or update a stream. env holds the service's database URL.
func BrokerUsers(t *testing.T, run cli.MainFunc, service string, env map[string]string) {
	t.Helper()
	ctx := context.Background()
	topo := events.Topology{Namespace: "users"}
	passwords := map[string]string{contract.SourceWallet: "wallet-secret", contract.SourceGL: "gl-secret", events.OperatorUser: "operator-secret"}
	var users []map[string]any
	for user, password := range passwords {
		p, err := topo.UserPermissions(user)
		require.NoError(t, err)
		users = append(users, map[string]any{"user": user, "password": password, "permissions": map[string]any{
			"publish": map[string]any{"allow": p.Publish}, "subscribe": map[string]any{"allow": p.Subscribe},
		}})
	}
	dir := t.TempDir()
	var conf bytes.Buffer
	enc := json.NewEncoder(&conf)
	enc.SetEscapeHTML(false) // nats-server takes JSON, but not its \u escapes
	require.NoError(t, enc.Encode(map[string]any{"authorization": map[string]any{"users": users}}))
	confFile := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(confFile, conf.Bytes(), 0o600))
	bin, err := systemtest.NATSServerBinary(ctx, dir)
	require.NoError(t, err)
	broker, err := systemtest.StartBrokerWithConfig(ctx, bin, dir, confFile)
	require.NoError(t, err)
	t.Cleanup(func() { _ = broker.Kill() })

	base := with(env, "NATS_URL="+broker.URL(), "EVENTS_NAMESPACE="+topo.Namespace, "EVENTS_INSECURE_UNSIGNED=true", "LOG_FORMAT=json")
	as := func(user string) map[string]string {
		return with(base, "NATS_USER="+user, "NATS_PASSWORD="+passwords[user])
	}
	command := func(env map[string]string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), err
	}

	_, err = command(with(as(service), "NATS_PASSWORD=wrong"), "serve")
	require.ErrorIs(t, err, events.ErrCredentialsRefused, "serve exits when the broker refuses its credentials")
	require.ErrorContains(t, err, "Authorization Violation")

	_, err = command(as(service), "serve")
	require.Error(t, err, "serve may not create the topology")
	require.ErrorContains(t, err, "stream "+topo.StreamName(contract.SourceWallet)+" is missing")
	require.ErrorContains(t, err, "run `"+service+" events setup` with an operator's NATS credentials")

	var setup struct {
		Service  string           `json:"service"`
		Topology []events.Applied `json:"topology"`
	}
	for _, want := range []string{events.ActionCreated, events.ActionUnchanged} {
		out, err := command(as(events.OperatorUser), "events", "setup", "--json")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(out), &setup))
		require.Equal(t, service, setup.Service)
		require.Len(t, setup.Topology, 3, "both streams and the service's consumer")
		for _, a := range setup.Topology {
			require.Equal(t, want, a.Action, a.Name)
		}
	}
	out, err := command(as(events.OperatorUser), "events", "setup")
	require.NoError(t, err)
	require.Contains(t, out, "unchanged stream   "+topo.StreamName(contract.SourceGL))

	health, _ := serveOnce(t, run, service, as(service))
	require.Contains(t, health, `"status":`, "serve runs as its own user once the topology is set up")
}
