package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"walletgl/internal/events/signing"
)

// keysFile keeps the local API keys make run made, so that a second make run reuses them: the
// services store only a key's hash, and a script that read the printed export line keeps working.
const keysFile = ".run/api-keys.json"

// localKey is a key devrun made for one service: its id, to check it is still valid, and its secret.
type localKey struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// ensureKeys migrates each service's database and returns an admin key for each, reusing the one
// of the last run while its service still has it unrevoked.
func ensureKeys(ctx context.Context, bins map[string]string, env []string) (map[string]string, error) {
	saved := map[string]localKey{}
	if raw, err := os.ReadFile(keysFile); err == nil {
		_ = json.Unmarshal(raw, &saved) // an unreadable file only means new keys
	}
	keys := map[string]string{}
	for _, service := range []string{"wallet", "gl"} {
		bin := bins[service]
		if _, err := command(ctx, bin, env, "migrate"); err != nil {
			return nil, err
		}
		if k, ok := saved[service]; ok && stillValid(ctx, bin, env, k.ID) {
			keys[service] = k.Key
			continue
		}
		out, err := command(ctx, bin, env, "keys", "create", "--name", "local-dev", "--scopes", "admin", "--json")
		if err != nil {
			return nil, err
		}
		var created localKey
		if err := json.Unmarshal(out, &created); err != nil || created.Key == "" {
			return nil, fmt.Errorf("%s keys create: unexpected output %q", service, out)
		}
		saved[service], keys[service] = created, created.Key
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
