package serve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/serve"
	"walletgl/internal/systemtest"
)

// The services' pools verify the server (sslmode=verify-full, sslrootcert=the CA) against a
// private cluster that accepts TLS connections only, with a certificate for 127.0.0.1 and
// localhost signed by a CA of the test's: migrations as the owner, grants, the runtime role's
// pool. A CA that did not sign the server's certificate is refused, and so is an address the
// certificate does not name.
func TestServicesConnectWithVerifyFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ca := newCA(t, "walletgl test CA")
	dir := clusterDir(t)
	serverCert, serverKey := ca.issue(t, "127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	c := startCluster(t, dir, serverCert, serverKey)
	caFile := writeFile(t, dir, "ca.crt", ca.certPEM)
	wrongFile := writeFile(t, dir, "wrong-ca.crt", newCA(t, "someone else's CA").certPEM)

	admin, err := pgx.Connect(ctx, c.url("postgres", "postgres", "sslmode=verify-full&sslrootcert="+url.QueryEscape(caFile)))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE ROLE gl_app LOGIN")
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))

	for _, tc := range []struct{ host, db string }{{"127.0.0.1", "gl_by_address"}, {"localhost", "gl_by_name"}} {
		t.Run("as "+tc.host, func(t *testing.T) {
			host, dbName := tc.host, tc.db
			verify := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(caFile)
			d := serve.Database{
				URL:            c.urlAt(host, "gl_app", dbName, verify),
				MigrateURL:     c.urlAt(host, "postgres", dbName, verify),
				MigrateOnStart: true,
			}
			log, buf := logBuffer()
			pool, err := serve.OpenDatabase(ctx, d, "gl", log)
			require.NoError(t, err)
			defer pool.Close()
			require.Empty(t, warnings(buf))
			require.Empty(t, autovacuumWarnings(buf), "the private cluster runs with autovacuum on")
			var ssl bool
			var user string
			require.NoError(t, pool.QueryRow(ctx, "SELECT ssl, current_user FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &user))
			require.True(t, ssl)
			require.Equal(t, "gl_app", user)
		})
	}

	t.Run("a CA that did not sign the server's certificate is refused", func(t *testing.T) {
		d := serve.Database{URL: c.url("postgres", "postgres", "sslmode=verify-full&sslrootcert="+url.QueryEscape(wrongFile))}
		log, _ := logBuffer()
		_, err := serve.OpenDatabase(ctx, d, "gl", log)
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
	})

	t.Run("an address the certificate does not name is refused", func(t *testing.T) {
		// 127.0.0.2 is the same server, which a CA check alone (verify-ca) accepts.
		verifyCA := "sslmode=verify-ca&sslrootcert=" + url.QueryEscape(caFile)
		conn, err := pgx.Connect(ctx, c.urlAt("127.0.0.2", "postgres", "postgres", verifyCA))
		require.NoError(t, err)
		require.NoError(t, conn.Close(ctx))
		d := serve.Database{URL: c.urlAt("127.0.0.2", "postgres", "postgres", "sslmode=verify-full&sslrootcert="+url.QueryEscape(caFile))}
		log, _ := logBuffer()
		_, err = serve.OpenDatabase(ctx, d, "gl", log)
		var wrongHost x509.HostnameError
		require.ErrorAs(t, err, &wrongHost)
	})

	t.Run("the cluster takes no connection without TLS", func(t *testing.T) {
		_, err := pgx.Connect(ctx, c.url("postgres", "postgres", "sslmode=disable"))
		require.ErrorContains(t, err, "pg_hba.conf rejects connection")
	})
}

type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a server certificate for the names and addresses; it returns it and its key in PEM.
func (ca *testCA) issue(t *testing.T, cn string, names []string, ips []net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	return n
}

// cluster is a PostgreSQL server of the test's own, stopped and removed when the test ends.
type cluster struct {
	port int
}

func (c cluster) url(user, db, params string) string { return c.urlAt("127.0.0.1", user, db, params) }

func (c cluster) urlAt(host, user, db, params string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?%s", user, net.JoinHostPort(host, strconv.Itoa(c.port)), db, params)
}

// pgBin finds the directory of initdb and pg_ctl: on the PATH, or where Debian and the
// PostgreSQL packages put them. A test that needs a cluster fails without them under CI=true
// and is skipped otherwise.
func pgBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.Sort(found)
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1])
	}
	noCluster(t, errors.New("initdb is neither on the PATH nor under /usr/lib/postgresql"))
	return ""
}

func noCluster(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot start a private PostgreSQL cluster: %v", err)
	}
	t.Skipf("cannot start a private PostgreSQL cluster: %v", err)
}

// clusterOwner is who runs the private cluster: PostgreSQL refuses to run as root, so a root
// test runs it as the user "postgres" (nil: the test's own user).
func clusterOwner(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		noCluster(t, fmt.Errorf("running as root, and no user postgres to run PostgreSQL as: %w", err))
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// clusterDir is a directory the cluster's user may use (t.TempDir's parent is the test user's
// alone), removed when the test ends.
func clusterDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walletgl-cluster-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if owner := clusterOwner(t); owner != nil {
		require.NoError(t, os.Chown(dir, int(owner.Uid), int(owner.Gid)))
	}
	return dir
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	if owner := clusterOwner(t); owner != nil {
		require.NoError(t, os.Chown(path, int(owner.Uid), int(owner.Gid)))
	}
	return path
}

// startCluster initialises a cluster in dir/data that listens on 127.0.0.1 and 127.0.0.2 with TLS (the
// certificate and key given, PEM) and refuses connections without it, starts it, and stops it
// when the test ends.
func startCluster(t *testing.T, dir string, certPEM, keyPEM []byte) cluster {
	t.Helper()
	bin := pgBin(t)
	owner := clusterOwner(t)
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		noCluster(t, err)
	}
	writeFile(t, data, "server.crt", certPEM)
	writeFile(t, data, "server.key", keyPEM)
	addr, err := systemtest.FreeAddr()
	require.NoError(t, err)
	_, portText, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1, 127.0.0.2'
port = %d
unix_socket_directories = '%s'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
fsync = off
max_connections = 60
shared_buffers = 16MB
`, port, dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	writeFile(t, data, "pg_hba.conf", []byte(
		"local all all trust\nhostssl all all 127.0.0.0/8 trust\nhostnossl all all 127.0.0.0/8 reject\n"))
	if err := run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Fatalf("%v\n%s", err, log)
	}
	t.Cleanup(func() {
		if err := run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Logf("stop the private cluster: %v", err)
		}
	})
	return cluster{port: port}
}
