package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run with settings of its own (the unsigned run of a pair) says so in its summary; a default
// run has no such line.
func TestTheSummaryNamesTheSettingsARunAdded(t *testing.T) {
	t.Parallel()
	rep := &Report{Started: time.Date(2026, 11, 30, 15, 1, 0, 0, time.UTC), Cores: 2}
	require.NotContains(t, rep.Markdown(), "Settings added")
	rep.Options.WalletEnv = []string{"EVENTS_SIGNING_KEY_FILE=", "EVENTS_INSECURE_UNSIGNED=true"}
	rep.Options.GLEnv = []string{"EVENTS_INSECURE_UNSIGNED=true"}
	md := rep.Markdown()
	require.Contains(t, md, "Settings added: wallet `EVENTS_SIGNING_KEY_FILE=,EVENTS_INSECURE_UNSIGNED=true`; gl `EVENTS_INSECURE_UNSIGNED=true`.\n")
	require.Less(t, strings.Index(md, "Settings added"), strings.Index(md, "| measure |"))
}
