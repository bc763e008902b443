// Package clitest checks, for the tests of both binaries, what their command lines promise
// alike: every command answers -h, and verify --json has the one shape of cli.Verification.
package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
)

// listed matches a command's line in the usage: two spaces, its words, two spaces or more.
var listed = regexp.MustCompile(`(?m)^  (\S+(?: \S+)*)  +\S`)

// EveryCommandHelps runs the program with -h, then every command its usage lists with -h and
// with --help, and requires each to succeed (exit status 0) and print the command's usage.
// It returns the commands it found, for the caller to check against what it expects.
func EveryCommandHelps(t *testing.T, run cli.MainFunc) []string {
	t.Helper()
	help := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut)
		require.NoError(t, err, "%q must succeed: %s", args, errOut.String())
		return out.String() + errOut.String()
	}
	var commands []string
	for _, m := range listed.FindAllStringSubmatch(help("-h"), -1) {
		commands = append(commands, m[1])
	}
	require.NotEmpty(t, commands)
	for _, name := range commands {
		for _, flag := range []string{"-h", "--help"} {
			usage := help(append(strings.Fields(name), flag)...)
			require.Contains(t, usage, "Settings of ", "%s %s", name, flag)
			require.Contains(t, usage, "-database-url", "%s %s", name, flag)
		}
	}
	return commands
}

// Verification decodes the output of verify --json, requiring exactly the fields of
// cli.Verification and of its checks: no more, none missing.
func Verification(t *testing.T, out string) cli.Verification {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var v cli.Verification
	require.NoError(t, dec.Decode(&v), out)
	again, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, string(again), out, "verify --json prints every field of cli.Verification")
	return v
}
