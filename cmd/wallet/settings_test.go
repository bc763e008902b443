package main

import (
	"testing"

	"walletgl/internal/cli/clitest"
)

// The settings table of docs/configuration.md is this binary's help, every command's
// settings merged: a setting added, renamed or re-described without the docs fails here
// (make docs rewrites the table).
func TestTheSettingsTableIsTheHelp(t *testing.T) {
	t.Parallel()
	clitest.DocSection(t, "../../docs/configuration.md", "settings:wallet", clitest.SettingsTable(t, "wallet", run))
}
