package cli_test

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
)

func TestParseOwnTakesTheCommandsFlagsFromAnywhere(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantRest   []string
		wantJSON   bool
		wantStatus string
	}{
		{"flags before the config flags", []string{"--json", "--status", "failed", "-database-url", "x"}, []string{"-database-url", "x"}, true, "failed"},
		{"flags after positional arguments", []string{"id1", "-status=dead_letter", "id2", "-json"}, []string{"id1", "id2"}, true, "dead_letter"},
		{"no flags of its own", []string{"-log-level", "debug", "id1"}, []string{"-log-level", "debug", "id1"}, false, ""},
		{"everything after -- is left alone", []string{"--", "--json"}, []string{"--", "--json"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			asJSON := fs.Bool("json", false, "")
			status := fs.String("status", "", "")
			rest, err := cli.ParseOwn(fs, tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.wantRest, rest)
			require.Equal(t, tt.wantJSON, *asJSON)
			require.Equal(t, tt.wantStatus, *status)
		})
	}
}
