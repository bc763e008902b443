package serve_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// haServices are the services of compose.yaml's profile ha, the layout of docs/deploy.md.
var haServices = []string{
	"etcd", "pg-1", "pg-2", "pg-3",
	"ha-nats-passwords", "nats-1", "nats-2", "nats-3", "ha-nats-setup",
	"ha-dbroles", "ha-setup",
	"wallet-1", "wallet-2", "gl-1", "gl-2", "ha-lb",
}

// The profile ha is the production layout on one host, apart from the single stack: its
// services are all in the profile and depend only on each other, its volumes are its own and
// declared, and every variable it gives a binary is one of that binary's settings. Images
// cannot be pulled here: the file and its configurations are read, not run.
func TestComposeProfileHAIsTheDeployLayout(t *testing.T) {
	t.Parallel()
	file, root := readComposeFile(t)
	services := file.Services
	settings := settingsOf(t, filepath.Join(root, "docs", "configuration.md"))
	ha := map[string]bool{}
	for _, name := range haServices {
		svc, ok := services[name]
		require.True(t, ok, "%s is in compose.yaml", name)
		require.Equal(t, []string{"ha"}, svc.Profiles, name)
		ha[name] = true
	}
	singleVolumes := map[string]bool{}
	for name, svc := range services {
		if !ha[name] {
			require.Empty(t, svc.Profiles, "%s: only the profile ha's services are in a profile", name)
			for _, v := range svc.Volumes {
				singleVolumes[strings.Split(v, ":")[0]] = true
			}
		}
	}
	for name := range ha {
		svc := services[name]
		for dep := range svc.DependsOn {
			require.True(t, ha[dep], "%s depends on %s, outside the profile: up ha-lb would start the single stack", name, dep)
		}
		for _, v := range svc.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, ".") {
				_, err := os.Stat(filepath.Join(root, src))
				require.NoError(t, err, "%s mounts %s", name, src)
				continue
			}
			require.Contains(t, file.Volumes, src, "%s's volume %s is declared", name, src)
			require.False(t, singleVolumes[src], "%s shares the volume %s with the single stack", name, src)
		}
		// The binaries this service runs, and the variables it gives them.
		command := strings.Join(slices.Concat(svc.Entrypoint, svc.Command), " ")
		var binaries []string
		for _, bin := range []string{"wallet", "gl"} {
			if strings.Contains(command, "exec "+bin+" ") || strings.Contains(command, bin+" events setup") || strings.Contains(command, "setup.sh") {
				binaries = append(binaries, bin)
			}
		}
		if svc.Build == "." && len(binaries) > 0 {
			for k := range svc.Environment {
				for _, bin := range binaries {
					require.True(t, settings[bin][k], "%s gives %s the variable %s, which is none of its settings", name, bin, k)
				}
			}
		}
	}

	nodes := "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222"
	for _, name := range []string{"wallet-1", "wallet-2", "gl-1", "gl-2"} {
		svc := services[name]
		bin := strings.Split(name, "-")[0]
		prefix := strings.ToUpper(bin)
		require.Equal(t, "false", svc.Environment[prefix+"_MIGRATE_ON_START"], "%s: migrated by the setup job, as the owner", name)
		require.Equal(t, nodes, svc.Environment["NATS_URL"], "%s: every node of the cluster", name)
		require.Equal(t, "3", svc.Environment["EVENTS_STREAM_REPLICAS"], name)
		require.Equal(t, bin, svc.Environment["NATS_USER"], "%s connects as its own NATS user", name)
		require.NotEmpty(t, svc.Environment["EVENTS_SIGNING_KEY_FILE"], name)
		require.NotEmpty(t, svc.Environment["EVENTS_TRUSTED_KEYS"], name)
		for k := range svc.Environment {
			require.NotContains(t, k, "DATABASE_URL", "%s: its database URLs come from the setup job's file", name)
			require.NotEqual(t, "EVENTS_INSECURE_UNSIGNED", k, name)
		}
		require.Equal(t, []string{"ha-" + bin + "-secrets:/secrets:ro"}, svc.Volumes, "%s: its own secrets, read-only", name)
		require.Contains(t, strings.Join(svc.Entrypoint, " "), ". /secrets/env && exec "+bin+" serve", name)
		require.Equal(t, "service_completed_successfully", svc.DependsOn["ha-setup"].Condition, name)
		require.Equal(t, "service_completed_successfully", svc.DependsOn["ha-nats-setup"].Condition, name)
		require.Empty(t, svc.User, "%s: the image's unprivileged user", name)
	}
	require.Equal(t, nodes, services["ha-nats-setup"].Environment["NATS_URL"])
	require.Equal(t, "3", services["ha-nats-setup"].Environment["EVENTS_STREAM_REPLICAS"], "the streams are R3")
	require.Equal(t, "operator", services["ha-nats-setup"].Environment["NATS_USER"])
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		svc := services[name]
		require.Equal(t, name, svc.Environment["NATS_SERVER_NAME"], name)
		require.Contains(t, strings.Join(svc.Command, " "), "nats-server -c /etc/nats/nats-ha.conf", name)
		require.Contains(t, svc.Volumes, "./deploy/compose/nats.conf:/etc/nats/nats.conf:ro", "%s: the single broker's users, included", name)
	}

	// The database members: Patroni over etcd, a synchronous standby, passwords everywhere.
	var patroni struct {
		Scope     string                 `yaml:"scope"`
		Etcd3     struct{ Hosts string } `yaml:"etcd3"`
		Bootstrap struct {
			DCS struct {
				SynchronousMode       bool `yaml:"synchronous_mode"`
				SynchronousModeStrict bool `yaml:"synchronous_mode_strict"`
				SynchronousNodeCount  int  `yaml:"synchronous_node_count"`
			} `yaml:"dcs"`
		} `yaml:"bootstrap"`
		PostgreSQL struct {
			PgHBA []string `yaml:"pg_hba"`
		} `yaml:"postgresql"`
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "patroni", "patroni.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &patroni))
	require.True(t, patroni.Bootstrap.DCS.SynchronousMode, "a commit waits for a synchronous standby")
	require.True(t, patroni.Bootstrap.DCS.SynchronousModeStrict, "no standby, no acknowledged write")
	require.Equal(t, 1, patroni.Bootstrap.DCS.SynchronousNodeCount)
	require.Equal(t, "etcd:2379", patroni.Etcd3.Hosts)
	require.NotEmpty(t, patroni.PostgreSQL.PgHBA)
	for _, line := range patroni.PostgreSQL.PgHBA {
		require.True(t, strings.HasSuffix(line, " scram-sha-256"), "pg_hba %q: a password, never trust", line)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "patroni", "Dockerfile"))
	require.NoError(t, err)
	require.Contains(t, string(dockerfile), "apt-get install -y --no-install-recommends patroni", "Debian's Patroni")
	for _, name := range []string{"pg-1", "pg-2", "pg-3"} {
		svc := services[name]
		require.Equal(t, "./deploy/compose/patroni", svc.Build, name)
		require.Equal(t, name, svc.Environment["PATRONI_NAME"], name)
		require.Equal(t, name+":5432", svc.Environment["PATRONI_POSTGRESQL_CONNECT_ADDRESS"], name)
		require.Equal(t, name+":8008", svc.Environment["PATRONI_RESTAPI_CONNECT_ADDRESS"], name)
	}

	// The services follow the primary; the GL reads from a standby.
	roles := services["ha-dbroles"]
	require.Equal(t, "pg-1:5432,pg-2:5432,pg-3:5432", roles.Environment["DB_HOSTS"])
	require.Equal(t, "read-write", roles.Environment["PGTARGETSESSIONATTRS"], "roles are made on the primary")
	script, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "db-roles.sh"))
	require.NoError(t, err)
	require.Contains(t, string(script), `attrs="&target_session_attrs=${3:-read-write}"`)
	require.Contains(t, string(script), "GL_READ_DATABASE_URL='$(url gl_app gl prefer-standby)'")
	setup, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "setup.sh"))
	require.NoError(t, err)
	require.Contains(t, string(setup), `echo "GL_READ_DATABASE_URL='$GL_READ_DATABASE_URL'"`, "the GL gets its read URL")

	// The load balancer sends work to every instance, only while it is ready.
	lb, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "haproxy.cfg"))
	require.NoError(t, err)
	require.Contains(t, string(lb), "option httpchk GET /readyz")
	for _, s := range []string{"wallet-1 wallet-1:8080", "wallet-2 wallet-2:8080", "gl-1 gl-1:8081", "gl-2 gl-2:8081"} {
		require.Contains(t, string(lb), "server "+s)
	}
	require.Equal(t, "http://ha-lb:8081", services["wallet-1"].Environment["GL_URL"], "the wallet reaches the GL through the balancer")
}

// settingsOf reads the variables of each binary's settings table in docs/configuration.md,
// which the binaries' tests keep equal to their help.
func settingsOf(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	row := regexp.MustCompile("^\\| `([A-Z0-9_]+)` \\|")
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- settings:") && strings.HasSuffix(line, ":begin -->"):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- settings:"), ":begin -->")
			out[section] = map[string]bool{}
		case strings.HasSuffix(line, ":end -->"):
			section = ""
		case section != "":
			if m := row.FindStringSubmatch(line); m != nil {
				out[section][m[1]] = true
			}
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out["wallet"])
	require.NotEmpty(t, out["gl"])
	return out
}
