package systemtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// Cluster is a PostgreSQL server of a test's or a soak's own, in a directory of its own, on a
// port of its own: the machine's server may run with test settings (autovacuum off), under which
// the outbox's and inbox's tables grow whatever the services do, and it cannot be given a
// standby of a test's own.
type Cluster struct {
	Port  int
	dir   string
	bin   string
	owner *syscall.Credential
}

// clusterConf is production's way in what a soak measures: autovacuum on (its nap scaled
// down like the soak's retention), durable commits. Sizes stay small for a 2-core machine.
const clusterConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 100
shared_buffers = 128MB
autovacuum = on
autovacuum_naptime = 10s
fsync = on
synchronous_commit = on
log_min_messages = warning
`

// StartCluster initialises a cluster in a new temporary directory and starts it; Stop stops it
// and removes the directory. PostgreSQL refuses to run as root: run by root, it runs as the
// user "postgres".
func StartCluster(ctx context.Context) (*Cluster, error) {
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

// newCluster makes the directory of a cluster not yet initialised.
func newCluster() (*Cluster, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if c.owner, err = PostgresUser(); err != nil {
		return nil, err
	}
	if c.dir, err = PostgresDir("postgres-", c.owner); err != nil {
		return nil, err
	}
	return c, nil
}

// PostgresUser is the user a server of our own runs as: the caller's own (nil), or "postgres"
// when the caller is root, which PostgreSQL refuses to run as.
func PostgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("start postgresql: running as root, and no user postgres to run it as: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// PostgresDir makes a new temporary directory that owner (nil: the caller) owns.
func PostgresDir(pattern string, owner *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("make a directory for postgresql: %w", err)
	}
	if owner != nil {
		if err := os.Chown(dir, int(owner.Uid), int(owner.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("make a directory for postgresql: %w", err)
		}
	}
	return dir, nil
}

// StartStandby starts a hot standby of c, streaming from it (pg_basebackup -R: a physical copy
// and its primary_conninfo), in a directory and on a port of its own; Stop stops it.
func (c *Cluster) StartStandby(ctx context.Context) (*Cluster, error) {
	s, err := newCluster()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	err = s.run(ctx, "pg_basebackup", "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	if err == nil {
		err = s.configure(data, "hot_standby = on\n")
	}
	if err == nil {
		err = s.pgCtlStart(ctx, data)
	}
	if err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

func (c *Cluster) start(ctx context.Context) error {
	data := filepath.Join(c.dir, "data")
	if err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		return err
	}
	if err := c.configure(data, ""); err != nil {
		return err
	}
	return c.pgCtlStart(ctx, data)
}

// configure gives the cluster in data a free port and its own socket directory, plus extra
// settings: appended, they win over the lines before them (a standby's copy of its primary's).
func (c *Cluster) configure(data, extra string) error {
	addr, err := FreeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	if c.Port, err = strconv.Atoi(port); err != nil {
		return fmt.Errorf("start postgresql: port %q: %w", port, err)
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("start postgresql: %w", err)
	}
	_, err = fmt.Fprintf(f, clusterConf+extra, c.Port, c.dir)
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("start postgresql: %w", err)
	}
	return nil
}

func (c *Cluster) pgCtlStart(ctx context.Context, data string) error {
	if err := c.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	return nil
}

// URL is the cluster's maintenance database, as the superuser.
func (c *Cluster) URL() string { return c.DatabaseURL("postgres") }

// DatabaseURL is the cluster's database name, as the superuser.
func (c *Cluster) DatabaseURL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, name)
}

// Stop stops the server (fast shutdown) and removes its directory; keep leaves the directory
// (the data and the server's log) in place, and says where.
func (c *Cluster) Stop(ctx context.Context, keep bool) (string, error) {
	err := c.run(context.WithoutCancel(ctx), "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "-t", "60", "stop")
	if keep {
		return c.dir, err
	}
	return "", errors.Join(err, os.RemoveAll(c.dir))
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.owner}
	// pg_ctl's server must outlive a Ctrl-C of a soak long enough for Stop to stop it.
	cmd.SysProcAttr.Setpgid = true
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// PostgresBin finds the directory of initdb and pg_ctl: on the PATH, or where Debian puts them.
func PostgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.Sort(found)
	if len(found) == 0 {
		return "", errors.New("start postgresql: initdb is neither on the PATH nor under /usr/lib/postgresql")
	}
	return filepath.Dir(found[len(found)-1]), nil
}
