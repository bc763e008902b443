package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/signing"
)

// CreateKey makes an API key with scopes (comma-separated, e.g. "admin") in the service's
// database, with the service's binary as an operator would (`<bin> keys create --json`), and
// returns its secret. The service must have created its database (it has once it listens).
func (p *Process) CreateKey(ctx context.Context, scopes string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Bin, "keys", "create", "--name", "harness", "--scopes", scopes, "--json")
	cmd.Env = append(os.Environ(), p.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s keys create: %w: %s", p.Name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var created struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(out, &created); err != nil || created.Key == "" {
		return "", fmt.Errorf("%s keys create: unexpected output %q", p.Name, out)
	}
	return created.Key, nil
}

// EventKeys are the event signing key pairs of a system's two services, in Dir as
// `<service> events keygen Dir` writes them.
type EventKeys struct {
	Dir string
}

// MakeEventKeys makes a key pair for each service in dir with the service's binary, as an
// operator would (`<bin> events keygen dir`); a pair already there is kept.
func MakeEventKeys(ctx context.Context, bins Binaries, dir string) (EventKeys, error) {
	for service, bin := range map[string]string{contract.SourceWallet: bins.Wallet, contract.SourceGL: bins.GL} {
		if private, _ := signing.KeyFiles(dir, service); fileExists(private) {
			continue
		}
		cmd := exec.CommandContext(ctx, bin, "events", "keygen", dir, "--json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			return EventKeys{}, fmt.Errorf("%s events keygen: %w: %s%s", service, err, out, bytes.TrimSpace(stderr.Bytes()))
		}
	}
	return EventKeys{Dir: dir}, nil
}

// Env is the environment of service: its own signing key, and the public key of the other
// service, whose events it consumes.
func (k EventKeys) Env(service string) []string {
	other := contract.SourceGL
	if service == contract.SourceGL {
		other = contract.SourceWallet
	}
	return signing.KeyEnv(k.Dir, service, other)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
