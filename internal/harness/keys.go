package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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
