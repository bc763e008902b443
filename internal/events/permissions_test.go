package events_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/events/signing"
	"walletgl/internal/systemtest"
)

// serverTLS makes a certificate for 127.0.0.1 signed by itself and writes it and its key into
// files: the server's certificate and key, and the CA file a client verifies it with (the
// certificate itself).
func serverTLS(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// startTLSBroker starts a nats-server process that takes TLS only, with the given users and
// permissions. Not the embedded broker: both services create and update their streams and
// consumers at once here, and under -race CI reported a data race inside the embedded
// nats-server v2.15.3 (its JetStream API workers), failing every test running then; the e2e
// broker test met one between a stream's update and a consumer's creation. A process keeps the
// server's own races out of the test binary.
func startTLSBroker(t *testing.T, certFile, keyFile string, users []map[string]any) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var conf bytes.Buffer
	enc := json.NewEncoder(&conf) // nats-server reads JSON as its configuration format,
	enc.SetEscapeHTML(false)      // but not JSON's \u escapes (the '>' of a wildcard)
	require.NoError(t, enc.Encode(map[string]any{
		"tls":           map[string]any{"cert_file": certFile, "key_file": keyFile, "timeout": 5},
		"authorization": map[string]any{"users": users},
	}))
	confFile := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(confFile, conf.Bytes(), 0o600))
	bin, err := systemtest.NATSServerBinary(ctx, dir)
	require.NoError(t, err)
	broker, err := systemtest.StartBrokerWithConfig(ctx, bin, dir, confFile)
	require.NoError(t, err, "start a TLS broker with users")
	t.Cleanup(func() { _ = broker.Kill() })
	return broker.URL()
}

// The least-privilege users of docs/security.md on a broker that takes TLS only: each service's
// user carries the whole pipeline in its direction (publish, consume, acknowledge, the GL's
// check of the wallet's ack floor), and the GL's user cannot publish a wallet event.
func TestLeastPrivilegeBrokerUsersCarryThePipelineAndNothingElse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	walletPool, _ := envtest.MigratedPool(t, "wallet")
	glPool, _ := envtest.MigratedPool(t, "gl")
	topo := events.Topology{Namespace: "perm", MaxBytes: envtest.StreamMaxBytes}
	certFile, keyFile := serverTLS(t)
	caFile := certFile // signed by itself: the certificate is its own CA
	users := map[string]string{contract.SourceWallet: "wallet-secret", contract.SourceGL: "gl-secret", events.OperatorUser: "operator-secret"}
	var conf []map[string]any
	for service, password := range users {
		p, err := topo.UserPermissions(service)
		require.NoError(t, err)
		conf = append(conf, map[string]any{"user": service, "password": password, "permissions": map[string]any{
			"publish": map[string]any{"allow": p.Publish}, "subscribe": map[string]any{"allow": p.Subscribe},
		}})
	}
	brokerURL := startTLSBroker(t, certFile, keyFile, conf)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	connect := func(service string) *nats.Conn {
		opts, err := events.Credentials{User: service, Password: users[service], TLSCA: caFile}.Options()
		require.NoError(t, err)
		nc, err := events.Connect(ctx, brokerURL, service, log, append(opts, nats.CustomInboxPrefix(events.ReplyPrefix(service)), nats.PermissionErrOnSubscribe(true))...)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		require.Eventually(t, nc.IsConnected, 10*time.Second, 20*time.Millisecond, "%s connects over TLS", service)
		return nc
	}
	walletNC, glNC, operatorNC := connect(contract.SourceWallet), connect(contract.SourceGL), connect(events.OperatorUser)

	// The services' users may not set up the topology; the operator's may, and then they see it as configured.
	walletJS, err := jetstream.New(walletNC)
	require.NoError(t, err)
	setupCtx, cancelSetup := context.WithTimeout(ctx, 3*time.Second)
	_, err = topo.Setup(setupCtx, walletJS, contract.SourceWallet)
	cancelSetup()
	require.Error(t, err, "the wallet's user may not create the streams")
	operatorJS, err := jetstream.New(operatorNC)
	require.NoError(t, err)
	for _, service := range []string{contract.SourceWallet, contract.SourceGL} {
		_, err := topo.Setup(ctx, operatorJS, service)
		require.NoError(t, err, "the operator sets up %s's topology", service)
		diffs, err := topo.Check(ctx, walletJS, service)
		require.NoError(t, err, "the wallet's user may check the topology")
		require.Empty(t, diffs)
	}

	// The wallet's side: its outbox and relay, and its consumer of the GL's acknowledgments.
	walletOutbox := outbox.New(contract.SourceWallet)
	id := uuid.Must(uuid.NewV7())
	_, err = walletOutbox.Add(ctx, walletPool, outbox.Event{ID: id, Type: contract.TypeTransferCompleted, AggregateID: "t", Time: time.Now(),
		Data: contract.TransferCompleted{TransferID: "t", FromWalletID: "a", ToWalletID: "b", Amount: 5, Currency: "CHF", CreatedAt: time.Now()}})
	require.NoError(t, err)
	walletRelay, err := outbox.NewRelay(outbox.RelayConfig{Source: contract.SourceWallet}, topo, walletPool, walletNC, log)
	require.NoError(t, err)
	ackCfg := inbox.ConsumerConfig{Trust: signing.AcceptUnsigned()}
	ackCfg.ConsumerSpec, err = topo.Consumer(events.ConsumerWallet)
	require.NoError(t, err)
	acks, err := inbox.NewConsumer(ackCfg, topo, walletNC, walletPool, inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		var posted contract.TransferPosted
		if err := env.DecodeData(&posted); err != nil {
			return err
		}
		_, err := walletOutbox.Acknowledge(ctx, tx, uuid.MustParse(posted.SourceEventID))
		return err
	}), log)
	require.NoError(t, err)

	// The GL's side: its consumer answers with an acknowledgment, its relay publishes it.
	glOutbox := outbox.New(contract.SourceGL)
	glRelay, err := outbox.NewRelay(outbox.RelayConfig{Source: contract.SourceGL, AckConsumer: events.ConsumerWallet}, topo, glPool, glNC, log)
	require.NoError(t, err)
	glCfg := inbox.ConsumerConfig{Trust: signing.AcceptUnsigned()}
	glCfg.ConsumerSpec, err = topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	poster, err := inbox.NewConsumer(glCfg, topo, glNC, glPool, inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		_, err := glOutbox.Add(ctx, tx, outbox.Event{ID: uuid.Must(uuid.NewV7()), Type: contract.TypeTransferPosted, AggregateID: "t", Time: time.Now(),
			Data: contract.TransferPosted{TransferID: "t", SourceEventID: env.ID, EntryID: uuid.NewString(), PostedAt: time.Now()}})
		return err
	}), log)
	require.NoError(t, err)

	for _, run := range []func(context.Context) error{walletRelay.Run, acks.Run, glRelay.Run, poster.Run} {
		runInBackground(t, run)
	}
	require.Eventually(t, func() bool {
		var status string
		require.NoError(t, walletPool.QueryRow(ctx, "SELECT status FROM outbox WHERE id = $1", id).Scan(&status))
		return status == "acknowledged"
	}, 30*time.Second, 50*time.Millisecond, "the wallet's row comes home through both users")
	require.Eventually(t, func() bool {
		_, err := glRelay.AcknowledgeAppliedOnce(ctx)
		require.NoError(t, err)
		var open int
		require.NoError(t, glPool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 30*time.Second, 50*time.Millisecond, "the GL's acknowledgment is acknowledged through its ack-floor check")

	// The GL's user publishing a wallet event: refused by the broker, nothing stored.
	js, err := jetstream.New(glNC)
	require.NoError(t, err)
	pubCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = js.Publish(pubCtx, topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted), []byte(`{"forged":true}`))
	require.Error(t, err, "the GL's user may not publish on the wallet's subjects")
	stream, err := jetstream.New(walletNC)
	require.NoError(t, err)
	s, err := stream.Stream(ctx, topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "only the wallet's own event is in its stream")

	// The wallet's user shortening a stream's max age, the GL's or its own: refused, nothing changed.
	for _, source := range []string{contract.SourceGL, contract.SourceWallet} {
		cfg := topo.StreamConfig(source)
		cfg.MaxAge = time.Minute * 3
		updCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := walletJS.UpdateStream(updCtx, cfg)
		cancel()
		require.Error(t, err, "the wallet's user may not update %s", cfg.Name)
		s, err := operatorJS.Stream(ctx, cfg.Name)
		require.NoError(t, err)
		require.Equal(t, topo.StreamConfig(source).MaxAge, s.CachedInfo().Config.MaxAge, "%s keeps its max age", cfg.Name)
	}

	// The wallet's user listening on the GL's replies: refused by the broker.
	sub, err := walletNC.SubscribeSync(events.ReplyPrefix(contract.SourceGL) + ".>")
	require.NoError(t, err)
	_, err = sub.NextMsg(5 * time.Second)
	require.ErrorIs(t, err, nats.ErrPermissionViolation, "the wallet's user may not read the GL's replies")

	// Without TLS the broker does not talk at all.
	plain, err := nats.Connect(brokerURL, nats.UserInfo("gl", users["gl"]), nats.Timeout(2*time.Second))
	if err == nil {
		plain.Close()
	}
	require.Error(t, err)
}

// Two ways to authenticate, a password without a user, or half a client certificate is a
// start-up error naming the settings, never a silent choice of one.
func TestCredentialsRefuseSettingsThatDoNotGoTogether(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]events.Credentials{
		"user and token":        {User: "gl", Password: "p", Token: "t"},
		"creds and nkey":        {CredsFile: "a.creds", NKeySeedFile: "seed"},
		"password without user": {Password: "p"},
		"cert without key":      {TLSCert: "c.pem"},
	} {
		require.Error(t, c.Validate(), name)
	}
	require.NoError(t, events.Credentials{User: "gl", Password: "p", TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem"}.Validate())
	_, err := events.Credentials{NKeySeedFile: filepath.Join(t.TempDir(), "missing")}.Options()
	require.Error(t, err, "a seed file that cannot be read fails at start")
}

// The nats-server configuration docs/security.md shows is the one the broker test runs: parsed by
// the server itself, its users hold exactly Topology.Permissions of the default namespace.
func TestTheDocumentedBrokerConfigurationIsTopologyPermissions(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	require.NoError(t, err)
	start := strings.Index(string(doc), "```\nauthorization {")
	require.GreaterOrEqual(t, start, 0, "docs/security.md shows an authorization block")
	block := string(doc)[start+4:]
	block = block[:strings.Index(block, "```")]
	conf := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(block), 0o600))
	requireTopologyUsers(t, conf)
}

// compose.yaml's broker runs the documented users, no more and no less; the operator's user sets
// the topology up before the services start, and each service connects as its own user, with
// the password the setup job copies into that service's own env file.
func TestTheComposeBrokerConfigurationIsTopologyPermissions(t *testing.T) {
	opts := requireTopologyUsers(t, filepath.Join("..", "..", "deploy", "compose", "nats.conf"))
	require.True(t, opts.JetStream, "compose's broker runs JetStream")
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	require.NoError(t, err)
	type service struct {
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	}
	var compose struct {
		Services map[string]service `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	setupScript, err := os.ReadFile(filepath.Join("..", "..", "deploy", "compose", "setup.sh"))
	require.NoError(t, err)
	nats := compose.Services["nats"]
	require.Contains(t, nats.Volumes, "./deploy/compose/nats.conf:/etc/nats/nats.conf:ro")
	require.Contains(t, strings.Join(nats.Command, " "), "nats-server -c /etc/nats/nats.conf", "the broker runs with its users")
	setup := compose.Services["nats-setup"]
	require.Equal(t, events.OperatorUser, setup.Environment["NATS_USER"])
	require.Contains(t, strings.Join(setup.Command, " "), "wallet events setup; gl events setup")
	for _, name := range []string{contract.SourceWallet, contract.SourceGL} {
		svc := compose.Services[name]
		require.Equal(t, name, svc.Environment["NATS_USER"], "%s connects as its own user", name)
		require.Contains(t, string(setupScript), "NATS_PASSWORD='$(cat /nats/"+name+")'", "%s gets its own password, in its own env file", name)
		require.Contains(t, svc.DependsOn, "nats-setup", "%s starts after the topology is set up", name)
		require.NotEmpty(t, svc.Environment["EVENTS_SIGNING_KEY_FILE"], "%s signs its events", name)
		require.NotEmpty(t, svc.Environment["EVENTS_TRUSTED_KEYS"], "%s verifies the other's events", name)
	}
}

// requireTopologyUsers parses the nats-server configuration conf with the server itself and
// requires its users to be the wallet's, the GL's and the operator's with exactly the
// permissions the topology of the default namespace gives them.
func requireTopologyUsers(t *testing.T, conf string) *server.Options {
	t.Helper()
	t.Setenv("WALLET_NATS_PASSWORD", "w")
	t.Setenv("GL_NATS_PASSWORD", "g")
	t.Setenv("OPERATOR_NATS_PASSWORD", "o")
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err)
	require.Len(t, opts.Users, 3)
	topo := events.Topology{}
	var names []string
	for _, u := range opts.Users {
		names = append(names, u.Username)
		want, err := topo.UserPermissions(u.Username)
		require.NoError(t, err, u.Username)
		require.Equal(t, want.Publish, u.Permissions.Publish.Allow, "%s may publish", u.Username)
		require.Equal(t, want.Subscribe, u.Permissions.Subscribe.Allow, "%s may subscribe", u.Username)
		require.Nil(t, u.Permissions.Publish.Deny, u.Username)
	}
	require.ElementsMatch(t, []string{contract.SourceWallet, contract.SourceGL, events.OperatorUser}, names)
	return opts
}

// Each node of compose.yaml's profile ha runs the single broker's users, exactly (nats-ha.conf
// includes nats.conf), with JetStream, in a cluster of the three nodes.
func TestTheComposeClusterConfigurationIsTopologyPermissions(t *testing.T) {
	t.Setenv("NATS_SERVER_NAME", "nats-2")
	opts := requireTopologyUsers(t, filepath.Join("..", "..", "deploy", "compose", "nats-ha.conf"))
	require.True(t, opts.JetStream, "every node runs JetStream")
	require.Equal(t, "nats-2", opts.ServerName, "each node is named by NATS_SERVER_NAME")
	require.Equal(t, "walletgl", opts.Cluster.Name)
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Host)
	}
	require.Equal(t, []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}, routes)
}
