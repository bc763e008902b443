package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/envtest"
	"walletgl/internal/events/signing"
	"walletgl/internal/systemtest"
)

// SignedEvents checks what both binaries promise of signed events, for service, which consumes
// producer's events: `events keygen DIR` writes DIR/<service>.key (mode 0600) and
// DIR/<service>.pub and never overwrites them; serve refuses to start without a signing key
// and trusted keys, with another service's key, or with trusted keys that hold none of
// producer's; it starts with its keys; and with EVENTS_INSECURE_UNSIGNED=true it starts
// without them, warning in its log and in /healthz. env holds the service's database URL.
func SignedEvents(t *testing.T, run cli.MainFunc, service, producer string, env map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	command := func(env map[string]string, args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), errOut.String(), err
	}

	out, _, err := command(env, "events", "keygen", dir, "--json")
	require.NoError(t, err)
	var made map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &made))
	require.Equal(t, []string{"key_id", "private_key_file", "public_key_file", "service"}, slices.Sorted(maps.Keys(made)), "keygen --json")
	require.Equal(t, service, made["service"])
	require.Equal(t, filepath.Join(dir, service+".key"), made["private_key_file"])
	require.Equal(t, filepath.Join(dir, service+".pub"), made["public_key_file"])
	info, err := os.Stat(made["private_key_file"])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	pub, err := signing.ReadPublicKey(made["public_key_file"])
	require.NoError(t, err)
	require.Equal(t, made["key_id"], pub.ID)
	_, _, err = command(env, "events", "keygen", dir)
	require.ErrorContains(t, err, "never overwritten")
	_, _, err = command(env, "events", "keygen")
	require.ErrorContains(t, err, "give the directory")

	// The producer's pair, as its own binary would make it.
	producerKey, err := signing.GenerateKey(producer)
	require.NoError(t, err)
	_, _, err = signing.WriteKeyFiles(dir, producerKey)
	require.NoError(t, err)
	keyEnv := signing.KeyEnv(dir, service, producer)
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  []string
	}{
		{"serve refuses to start without event keys", env,
			[]string{"EVENTS_SIGNING_KEY_FILE is not set", "EVENTS_TRUSTED_KEYS is not set", service + " events keygen DIR", "EVENTS_INSECURE_UNSIGNED=true"}},
		{"serve refuses another service's signing key", with(env, keyEnv[1], "EVENTS_SIGNING_KEY_FILE="+filepath.Join(dir, producer+".key")),
			[]string{"is " + producer + "'s key, not " + service + "'s"}},
		{"serve refuses trusted keys without its producer's", with(env, keyEnv[0], "EVENTS_TRUSTED_KEYS="+made["public_key_file"]),
			[]string{"EVENTS_TRUSTED_KEYS holds no key of " + producer}},
		{"serve refuses a trusted key file that is not there", with(env, keyEnv[0], "EVENTS_TRUSTED_KEYS="+filepath.Join(dir, "nobody.pub")),
			[]string{"EVENTS_TRUSTED_KEYS: read key file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := command(tc.env, "serve")
			require.Error(t, err)
			for _, want := range tc.err {
				require.ErrorContains(t, err, want)
			}
		})
	}

	natsURL := envtest.NATSURL(t)
	serveEnv := with(env, "NATS_URL="+natsURL, "EVENTS_NAMESPACE="+envtest.Namespace(t, natsURL), envtest.StreamEnv)
	t.Run("serve starts with its keys, without a warning", func(t *testing.T) {
		health, log := serveOnce(t, run, service, with(serveEnv, keyEnv...))
		require.JSONEq(t, `{"status":"ok"}`, health)
		require.NotContains(t, log, "EVENTS_INSECURE_UNSIGNED")
	})
	t.Run("serve starts with EVENTS_INSECURE_UNSIGNED=true, warning in its log and health", func(t *testing.T) {
		health, log := serveOnce(t, run, service, with(serveEnv, "EVENTS_INSECURE_UNSIGNED=true"))
		require.Contains(t, health, `"event_signing":"warning"`)
		require.Contains(t, log, "EVENTS_INSECURE_UNSIGNED: events are published unsigned")
		require.Contains(t, log, "EVENTS_INSECURE_UNSIGNED: events are accepted unverified")
	})
}

// with is env with extra settings (KEY=VALUE) added or replaced.
func with(env map[string]string, extra ...string) map[string]string {
	e := maps.Clone(env)
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		e[k] = v
	}
	return e
}

// serveOnce runs `serve` until its /healthz answers 200, and returns that answer and the log.
func serveOnce(t *testing.T, run cli.MainFunc, service string, env map[string]string) (health, log string) {
	t.Helper()
	addr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	env = with(env, strings.ToUpper(service)+"_HTTP_ADDR="+addr, "LOG_FORMAT=json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &logs)
	}()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		health = string(body)
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "serve never healthy")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	return health, logs.String()
}

// lockedBuffer is a buffer a running command writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
