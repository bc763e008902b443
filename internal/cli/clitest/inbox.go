package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/events/admin"
)

// InboxResolve checks what `inbox resolve` promises in both binaries, on the database env
// names, whose inbox (consumer's) holds the failed row poison and the processed row processed:
// without ids or a --reason it is refused and moves nothing; it resolves a failed row given by
// its event id alone, refuses a processed row and an unknown id with why, and exits non-zero
// for them; the row keeps the operator and the reason; one audit record (inbox.resolve, the
// operator as actor) names the ids, the reason, where it was asked and the outcome.
func InboxResolve(t *testing.T, run cli.MainFunc, env map[string]string, consumer, poison, processed string) {
	t.Helper()
	command := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), err
	}
	resolves := func() []auth.AuditEntry {
		t.Helper()
		out, err := command("audit", "list", "--limit", "1000", "--json")
		require.NoError(t, err)
		var entries, found []auth.AuditEntry
		require.NoError(t, json.Unmarshal([]byte(out), &entries), out)
		for _, e := range entries {
			if e.Action == admin.ActionResolve {
				found = append(found, e)
			}
		}
		return found
	}
	listed := func(status string) []admin.InboxRow {
		t.Helper()
		out, err := command("inbox", "list", "--status", status, "--json")
		require.NoError(t, err)
		var rows []admin.InboxRow
		require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
		return rows
	}

	_, err := command("inbox", "resolve", "--reason", "forged")
	require.ErrorContains(t, err, "inbox resolve: give the ids of failed inbox rows ("+consumer+":<event id>, or the event id)")
	for _, args := range [][]string{{poison}, {poison, "--reason", "  "}} {
		_, err = command(append([]string{"inbox", "resolve"}, args...)...)
		require.ErrorContains(t, err, "inbox resolve: --reason is required", "%q", args)
	}
	require.Len(t, listed("failed"), 1, "a refused resolve moves nothing")
	require.Empty(t, resolves(), "nor records anything")

	eventID := strings.TrimPrefix(poison, consumer+":")
	reason := "forged: reported to security"
	out, err := command("inbox", "resolve", eventID, processed, consumer+":no-such-event", "--reason", reason)
	require.ErrorContains(t, err, "inbox resolve: 2 of 3 events refused", "exit non-zero when an id is refused")
	require.Regexp(t, `(?m)^`+poison+`\s+resolved$`, out)
	require.Regexp(t, `(?m)^`+processed+`\s+refused: it is processed; only failed events are resolved$`, out)
	require.Regexp(t, `(?m)^`+consumer+`:no-such-event\s+refused: no such inbox row$`, out)

	operator := cli.Operator().Name
	rows := listed("resolved")
	require.Len(t, rows, 1)
	require.Equal(t, poison, rows[0].ID)
	require.Equal(t, operator, rows[0].ResolvedBy)
	require.Equal(t, reason, rows[0].Resolution)
	require.NotNil(t, rows[0].ResolvedAt)
	require.Empty(t, listed("failed"))
	require.Len(t, listed("processed"), 1, "the processed row is untouched")

	audited := resolves()
	require.Len(t, audited, 1)
	require.Equal(t, operator, audited[0].Actor)
	require.Nil(t, audited[0].KeyID)
	require.Equal(t, poison+","+processed+","+consumer+":no-such-event", audited[0].Target)
	require.JSONEq(t, `{"resolution":"`+reason+`","via":"cli","resolved":["`+poison+`"],`+
		`"refused":[{"id":"`+processed+`","status":"processed"},{"id":"`+consumer+`:no-such-event","status":""}]}`, string(audited[0].Detail))

	out, err = command("inbox", "resolve", poison, "--reason", "again", "--json")
	require.ErrorContains(t, err, "inbox resolve: 1 of 1 events refused", "a resolved event is not resolved again")
	require.JSONEq(t, `{"resolved":[],"refused":[{"id":"`+poison+`","status":"resolved"}]}`, out)
	require.Equal(t, reason, listed("resolved")[0].Resolution, "its first reason stands")
}
