package clitest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
)

// UpdateDocs rewrites the generated sections of the docs instead of comparing them
// (go test ./cmd/... -run SettingsTable -update-docs; make docs).
var UpdateDocs = flag.Bool("update-docs", false, "rewrite the docs' generated sections from the binaries' help")

// setting is one line of a command's help under "Settings of …".
type setting struct {
	env, flag, def, usage string
	commands              []string
}

// settingLine matches a setting with a flag: -name (ENV, default "value").
var settingLine = regexp.MustCompile(`^  -(\S+) \(([A-Z0-9_]+), default "(.*)"\)$`)

// envOnly matches a setting read from the environment alone: its variable by itself.
var envOnly = regexp.MustCompile(`^  ([A-Z0-9_]+)$`)

// SettingsTable runs every command of the program with -h and returns the Markdown table of
// the settings their help lists: each variable once, with its flag, default, the commands that
// read it and its description, in the order the help first shows them.
func SettingsTable(t *testing.T, program string, run cli.MainFunc) string {
	t.Helper()
	commands := EveryCommandHelps(t, run)
	var order []string
	byEnv := map[string]*setting{}
	for _, name := range commands {
		var out, errOut bytes.Buffer
		args := append(strings.Fields(name), "-h")
		require.NoError(t, run(context.Background(), args, func(string) string { return "" }, &out, &errOut))
		for _, s := range parseSettings(t, errOut.String()+out.String()) {
			known, ok := byEnv[s.env]
			if !ok {
				known = &s
				byEnv[s.env] = known
				order = append(order, s.env)
			}
			require.Equal(t, known.def, s.def, "%s: one default for every command", s.env)
			known.commands = append(known.commands, name)
		}
	}
	var b strings.Builder
	b.WriteString("| variable | flag | default | read by | meaning |\n|---|---|---|---|---|\n")
	for _, env := range order {
		s := byEnv[env]
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.env, code("-"+s.flag, s.flag != ""), code(s.def, s.def != ""),
			readBy(program, s.commands, commands), escapeCell(s.usage))
	}
	return b.String()
}

// parseSettings reads the settings section of one command's help.
func parseSettings(t *testing.T, help string) []setting {
	t.Helper()
	var out []setting
	in := false
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Settings of "):
			in = true
		case !in:
		case strings.HasPrefix(line, "    \t"):
			require.NotEmpty(t, out, "a description before any setting: %q", line)
			out[len(out)-1].usage = strings.TrimPrefix(line, "    \t")
		case settingLine.MatchString(line):
			m := settingLine.FindStringSubmatch(line)
			out = append(out, setting{flag: m[1], env: m[2], def: m[3]})
		case envOnly.MatchString(line):
			out = append(out, setting{env: envOnly.FindStringSubmatch(line)[1]})
		default:
			t.Fatalf("unexpected line in the settings of a command's help: %q", line)
		}
	}
	return out
}

// readBy names the commands that read a setting: every command, or those that do.
func readBy(program string, readers, all []string) string {
	if len(readers) == len(all) {
		return "every command"
	}
	names := make([]string, len(readers))
	for i, c := range readers {
		names[i] = "`" + program + " " + c + "`"
	}
	return strings.Join(names, ", ")
}

func code(s string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return "`" + s + "`"
}

// escapeCell keeps a description inside its table cell.
func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// DocSection requires the section of the Markdown file at path between the markers
// <!-- name:begin --> and <!-- name:end --> to be want, or rewrites it with -update-docs.
func DocSection(t *testing.T, path, name, want string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := bytes.Index(raw, []byte(begin)), bytes.Index(raw, []byte(end))
	require.True(t, i >= 0 && j > i, "%s has no section %s…%s", path, begin, end)
	got := string(raw[i+len(begin) : j])
	if *UpdateDocs {
		updated := slices.Concat(raw[:i+len(begin)], []byte(want), raw[j:])
		require.NoError(t, os.WriteFile(path, updated, 0o644))
		return
	}
	require.Equal(t, want, got, "%s's section %s is generated from the binaries' help: run make docs", path, name)
}
