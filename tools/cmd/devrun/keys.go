package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"walletgl/internal/auth"
	"walletgl/internal/events/signing"
	glapi "walletgl/internal/gl/httpapi"
)

// keysFile keeps the local API keys make run made, so that a second make run reuses them: the
// services store only a key's hash, and a script that read the printed export line keeps working.
const keysFile = ".run/api-keys.json"

// localKey is a key devrun made for one service: its id, to check it is still valid, and its secret.
type localKey struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// localKeySpec is a key devrun makes: on which service, named what, with which scopes.
type localKeySpec struct {
	service string // the service whose keys create makes it
	name    string
	scopes  []auth.Scope
}

// The keys devrun makes, by their entry in keysFile: one with admin on each service for the
// README's try-it session (WALLET_API_KEY, GL_API_KEY), and the GL key the wallet itself calls
// the GL with (its console's transfer trace and pipeline metrics, wallet outbox reconcile), which
// reads only: a wallet that leaks it gives away no posting, rule or inbox action.
const (
	walletAdminKey = "wallet"
	glAdminKey     = "gl"
	walletGLKey    = "wallet-to-gl"
)

// localKeys are the keys devrun makes, by their entry in keysFile.
func localKeys() map[string]localKeySpec {
	return map[string]localKeySpec{
		walletAdminKey: {service: "wallet", name: "local-dev", scopes: []auth.Scope{auth.Admin}},
		glAdminKey:     {service: "gl", name: "local-dev", scopes: []auth.Scope{auth.Admin}},
		walletGLKey:    {service: "gl", name: "wallet", scopes: []auth.Scope{glapi.ScopeLedgerRead, auth.MetricsRead}},
	}
}

// ensureKeys migrates each service's database and returns the secret of each of localKeys,
// reusing the one of the last run while its service still has it unrevoked.
func ensureKeys(ctx context.Context, bins map[string]string, env []string) (map[string]string, error) {
	saved := map[string]localKey{}
	if raw, err := os.ReadFile(keysFile); err == nil {
		_ = json.Unmarshal(raw, &saved) // an unreadable file only means new keys
	}
	for _, service := range []string{"wallet", "gl"} {
		if _, err := command(ctx, bins[service], env, "migrate"); err != nil {
			return nil, err
		}
	}
	keys := map[string]string{}
	for entry, spec := range localKeys() {
		bin := bins[spec.service]
		if k, ok := saved[entry]; ok && stillValid(ctx, bin, env, k.ID) {
			keys[entry] = k.Key
			continue
		}
		out, err := command(ctx, bin, env, "keys", "create", "--name", spec.name, "--scopes", joinScopes(spec.scopes), "--json")
		if err != nil {
			return nil, err
		}
		var created localKey
		if err := json.Unmarshal(out, &created); err != nil || created.Key == "" {
			return nil, fmt.Errorf("%s keys create: unexpected output %q", spec.service, out)
		}
		saved[entry], keys[entry] = created, created.Key
	}
	raw, err := json.Marshal(saved)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(keysFile), 0o700); err != nil {
		return nil, err
	}
	return keys, os.WriteFile(keysFile, raw, 0o600)
}

func joinScopes(scopes []auth.Scope) string {
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

// stillValid reports whether the service lists the key with this id, unrevoked.
func stillValid(ctx context.Context, bin string, env []string, id string) bool {
	out, err := command(ctx, bin, env, "keys", "list", "--json")
	if err != nil {
		return false
	}
	var list []struct {
		ID        string  `json:"id"`
		RevokedAt *string `json:"revoked_at"`
	}
	if json.Unmarshal(out, &list) != nil {
		return false
	}
	for _, k := range list {
		if k.ID == id {
			return k.RevokedAt == nil
		}
	}
	return false
}

// command runs bin with args and returns its standard output; its standard error goes into
// the error when it fails.
func command(ctx context.Context, bin string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w: %s", filepath.Base(bin), args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// eventKeysDir holds the event signing keys make run made (`<service> events keygen`), reused
// by every later make run.
const eventKeysDir = ".run/events"

// ensureEventKeys makes (or reuses) an event signing key pair for each service with its binary
// and returns the settings of each: its own private key, and the public key of the other
// service, whose events it consumes.
func ensureEventKeys(ctx context.Context, bins map[string]string, env []string) (map[string][]string, error) {
	for service, bin := range bins {
		if _, err := os.Stat(filepath.Join(eventKeysDir, service+".key")); err == nil {
			continue
		}
		if _, err := command(ctx, bin, env, "events", "keygen", eventKeysDir, "--json"); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(eventKeysDir)
	if err != nil {
		return nil, err
	}
	return map[string][]string{
		"wallet": signing.KeyEnv(abs, "wallet", "gl"),
		"gl":     signing.KeyEnv(abs, "gl", "wallet"),
	}, nil
}
