package serve_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeService is what these tests read of a compose.yaml service.
type composeService struct {
	Profiles    []string          `yaml:"profiles"`
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	User        string            `yaml:"user"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

func readCompose(t *testing.T) (services map[string]composeService, root string) {
	t.Helper()
	file, root := readComposeFile(t)
	return file.Services, root
}

// composeFile is what these tests read of compose.yaml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func readComposeFile(t *testing.T) (composeFile, string) {
	t.Helper()
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "compose.yaml"))
	require.NoError(t, err)
	var file composeFile
	require.NoError(t, yaml.Unmarshal(raw, &file))
	return file, root
}

// compose.yaml is secure by default on the database side: the services run as runtime roles
// the setup jobs made, never as the superuser or an owner; migrations and API keys run as each
// database's owner in the one-shot setup job, which also makes the keys; events are signed.
// Images cannot be pulled here: the file and its scripts are read, not run.
func TestComposeRunsTheServicesAsTheirRuntimeRoles(t *testing.T) {
	t.Parallel()
	services, root := readCompose(t)
	for _, name := range []string{"wallet", "gl"} {
		svc, ok := services[name]
		require.True(t, ok, name)
		prefix := strings.ToUpper(name)
		for k, v := range svc.Environment {
			require.NotContains(t, v, "postgres:", "%s %s: no superuser's URL", name, k)
			require.NotContains(t, k, "DATABASE_URL", "%s: its database URL comes from the setup job's file", name)
			require.NotEqual(t, "EVENTS_INSECURE_UNSIGNED", k, "%s: events are signed", name)
			require.NotEqual(t, "GL_API_KEY", k, "%s: API keys come from the setup job", name)
		}
		require.Equal(t, "false", svc.Environment[prefix+"_MIGRATE_ON_START"], "%s: migrated by the setup job, as the owner", name)
		require.NotEmpty(t, svc.Environment["EVENTS_SIGNING_KEY_FILE"], name)
		require.NotEmpty(t, svc.Environment["EVENTS_TRUSTED_KEYS"], name)
		require.Equal(t, []string{name + "-secrets:/secrets:ro"}, svc.Volumes, "%s: its own secrets, read-only, and nobody else's", name)
		require.Contains(t, strings.Join(svc.Entrypoint, " "), ". /secrets/env && exec "+name+" serve", name)
		require.Equal(t, "service_completed_successfully", svc.DependsOn["setup"].Condition, name)
		require.Empty(t, svc.User, "%s: the image's unprivileged user", name)
	}

	setup := services["setup"]
	require.Contains(t, setup.Volumes, "setup:/setup")
	require.Equal(t, "service_completed_successfully", setup.DependsOn["dbroles"].Condition)
	for name, svc := range services {
		if !slices.Contains([]string{"setup", "dbroles", "ha-setup", "ha-dbroles"}, name) {
			require.False(t, slices.ContainsFunc(svc.Volumes, func(v string) bool {
				return strings.HasPrefix(v, "setup:") || strings.HasPrefix(v, "ha-setup:")
			}), "%s: the owners' URLs and every key stay with the setup jobs", name)
		}
		if !slices.Contains([]string{"postgres", "dbroles", "pg-1", "pg-2", "pg-3", "ha-dbroles"}, name) {
			for _, v := range svc.Environment {
				require.NotContains(t, v, "POSTGRES_PASSWORD", "%s: the superuser's password is the dbroles job's alone", name)
			}
		}
	}

	script, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "setup.sh"))
	require.NoError(t, err)
	for _, want := range []string{
		"wallet migrate", "gl migrate", // as the owner: db.env sets the migrate URLs
		"wallet keys create --name operator --scopes admin",
		"gl keys create --name wallet --scopes ledger:read,metrics:read", // the wallet's GL key reads only
		"events keygen",
	} {
		require.Contains(t, string(script), want)
	}
	require.NotContains(t, string(script), "INSECURE")
	roles, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "db-roles.sh"))
	require.NoError(t, err)
	for _, want := range []string{
		"WALLET_MIGRATE_DATABASE_URL='$(url wallet_owner wallet)'", "WALLET_DATABASE_URL='$(url wallet_app wallet)'",
		"GL_MIGRATE_DATABASE_URL='$(url gl_owner gl)'", "GL_DATABASE_URL='$(url gl_app gl)'",
		"NOSUPERUSER NOCREATEROLE",
	} {
		require.Contains(t, string(roles), want)
	}
}
