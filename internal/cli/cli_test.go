package cli_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/logging"
)

// settings stand in for a service's Config.
type settings struct {
	DatabaseURL string
	Level       int
	Log         logging.Config
}

func (s *settings) Bind(set *config.Set) {
	set.String(&s.DatabaseURL, "TEST_DATABASE_URL", "database-url", "postgres://localhost/test", "the database")
	set.Int(&s.Level, "TEST_LEVEL", "level", 1, "a number")
}

func (s *settings) Validate() error {
	if s.Level < 0 {
		return errors.New("TEST_LEVEL must not be negative")
	}
	return nil
}

func (s *settings) Database() string        { return s.DatabaseURL }
func (s *settings) OwnerDatabase() string   { return "" }
func (s *settings) Logging() logging.Config { return s.Log }

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantArgs   []string
		wantJSON   bool
		wantStatus string
		wantLevel  int
	}{
		{"flags before the positional arguments", []string{"--json", "--status", "failed", "-level", "3", "id1"}, nil, []string{"id1"}, true, "failed", 3},
		{"flags between and after them", []string{"id1", "-status=dead_letter", "id2", "--level=4", "-json"}, nil, []string{"id1", "id2"}, true, "dead_letter", 4},
		{"a setting comes from the environment", []string{"id1"}, map[string]string{"TEST_LEVEL": "7"}, []string{"id1"}, false, "", 7},
		{"its flag overrides the environment", []string{"--level", "8"}, map[string]string{"TEST_LEVEL": "7"}, nil, false, "", 8},
		{"everything after -- is positional", []string{"id1", "--", "--json", "-level"}, nil, []string{"id1", "--json", "-level"}, false, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s settings
			var asJSON bool
			var status string
			env := cli.Env{Getenv: func(k string) string { return tt.env[k] }, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Name: "test cmd"}
			args, err := cli.Parse(env, &s, func(set *config.Set) {
				cli.JSONFlag(set, &asJSON)
				set.Flags().StringVar(&status, "status", "", "a status")
			}, tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.wantArgs, args)
			require.Equal(t, tt.wantJSON, asJSON)
			require.Equal(t, tt.wantStatus, status)
			require.Equal(t, tt.wantLevel, s.Level)
		})
	}

	t.Run("settings out of range are a configuration error", func(t *testing.T) {
		t.Parallel()
		env := cli.Env{Getenv: func(string) string { return "" }, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Name: "test cmd"}
		_, err := cli.Parse(env, &settings{}, nil, []string{"--level", "-1"})
		require.EqualError(t, err, "configuration: TEST_LEVEL must not be negative")
	})
}

func TestRun(t *testing.T) {
	t.Parallel()
	var ran []string
	var gotEnv cli.Env
	leaf := func(ctx context.Context, env cli.Env, args []string) error {
		gotEnv = env
		var s settings
		var asJSON bool
		rest, err := cli.Parse(env, &s, func(set *config.Set) { cli.JSONFlag(set, &asJSON) }, args)
		ran = append(ran, rest...)
		return err
	}
	table := []cli.Command{
		{Name: "serve", Help: "serve it", RunFunc: leaf},
		{Name: "outbox", Sub: []cli.Command{
			{Name: "stats", Help: "rows per status", RunFunc: leaf},
			{Name: "list", Help: "rows of a status", RunFunc: leaf},
		}},
	}
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := cli.Run(context.Background(), "prog", table, args, cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut})
		return out.String() + errOut.String(), err
	}

	out, err := run("outbox", "list", "a", "--json", "b")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ran)
	require.Empty(t, out)
	require.Equal(t, "prog outbox list", gotEnv.Name)
	require.Equal(t, "rows of a status", gotEnv.Help)

	for _, args := range [][]string{nil, {"-h"}, {"--help"}, {"help"}} {
		out, err := run(args...)
		require.NoError(t, err, args)
		require.Contains(t, out, "Usage: prog <command> [flags]")
		require.Regexp(t, `(?m)^  outbox stats\s+rows per status$`, out, "a group's commands are listed under its name")
	}

	out, err = run("outbox")
	require.NoError(t, err, "a group alone lists its commands")
	require.Contains(t, out, "Usage: prog outbox <command>")
	require.Regexp(t, `(?m)^  list\s+rows of a status$`, out)

	for _, args := range [][]string{{"serve", "-h"}, {"serve", "--help"}, {"outbox", "stats", "x", "-h"}} {
		out, err := run(args...)
		require.NoError(t, err, "help is a success: exit status 0")
		require.Contains(t, out, ": "+map[string]string{"serve": "serve it", "outbox": "rows per status"}[args[0]]+"\n")
		require.Contains(t, out, "  -json\n")
		require.Contains(t, out, "  -level (TEST_LEVEL, default \"1\")")
	}

	_, err = run("outbox", "lost")
	require.EqualError(t, err, `unknown command "outbox lost"`)
	_, err = run("serve", "--no-such-flag")
	require.ErrorContains(t, err, "flag provided but not defined: -no-such-flag")
	require.False(t, errors.Is(err, flag.ErrHelp))
}
