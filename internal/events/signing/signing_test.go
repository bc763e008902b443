package signing_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/signing"
)

func TestKeyFilesRoundTripAndAreNeverOverwritten(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	key, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	private, public, err := signing.WriteKeyFiles(dir, key)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "wallet.key"), private)
	require.Equal(t, filepath.Join(dir, "wallet.pub"), public)
	info, err := os.Stat(private)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the private key is the owner's alone")
	raw, err := os.ReadFile(public)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "Service: wallet\nKey-Id: "+key.Public().ID+"\n-----BEGIN PUBLIC KEY-----\n"), string(raw))

	read, err := signing.ReadKey(private)
	require.NoError(t, err)
	require.Equal(t, key.Public(), read.Public())
	pub, err := signing.ReadPublicKey(public)
	require.NoError(t, err)
	require.Equal(t, key.Public(), pub)
	require.Len(t, pub.ID, 16)

	other, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	_, _, err = signing.WriteKeyFiles(dir, other)
	require.ErrorContains(t, err, "never overwritten")
	again, err := signing.ReadKey(private)
	require.NoError(t, err)
	require.Equal(t, key.Public(), again.Public(), "the first key is intact")

	_, err = signing.GenerateKey("bank")
	require.ErrorContains(t, err, `service "bank"`)
}

func TestKeyFilesSayWhoseKeyTheyHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	block := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}

	t.Run("a key made elsewhere (openssl) is read once a Service line stands above it", func(t *testing.T) {
		k, err := signing.ReadPublicKey(write("openssl.pub", "Service: gl\n"+block))
		require.NoError(t, err)
		require.Equal(t, contract.SourceGL, k.Service)
		require.Equal(t, signing.KeyID(pub), k.ID)
		s, err := signing.ReadKey(write("openssl.key", "Service: gl\n"+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))))
		require.NoError(t, err)
		require.Equal(t, k, s.Public())
	})
	t.Run("a key without its service is refused", func(t *testing.T) {
		_, err := signing.ReadPublicKey(write("bare.pub", block))
		require.ErrorContains(t, err, "Service")
	})
	t.Run("a key id that is not the key's is refused", func(t *testing.T) {
		_, err := signing.ReadPublicKey(write("edited.pub", "Service: gl\nKey-Id: 0000000000000000\n"+block))
		require.ErrorContains(t, err, "is not its key's id")
	})
	t.Run("a private key is not a public key", func(t *testing.T) {
		_, err := signing.ReadPublicKey(write("swapped.pub", "Service: gl\n"+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))))
		require.ErrorContains(t, err, `no PEM block "PUBLIC KEY"`)
	})
}

func TestTrustAcceptsAnEventOnlyFromItsProducer(t *testing.T) {
	t.Parallel()
	walletOld, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	walletNew, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	gl, err := signing.GenerateKey(contract.SourceGL)
	require.NoError(t, err)
	stranger, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	// Two keys of the wallet while it rotates, and the GL's.
	trust, err := signing.NewTrust(walletOld.Public(), walletNew.Public(), gl.Public())
	require.NoError(t, err)
	body := []byte(`{"specversion":"1.0","id":"e1","type":"TransferCompleted.v1","data":{"amount":100}}`)
	signed := func(k *signing.Key, b []byte) nats.Header {
		msg := &nats.Msg{Data: b}
		k.Sign(msg)
		return msg.Header
	}

	cases := []struct {
		name   string
		header nats.Header
		body   []byte
		err    string // "" when accepted
	}{
		{"an event signed by the producer's key is accepted", signed(walletOld, body), body, ""},
		{"an event signed by the producer's other trusted key is accepted (rotation)", signed(walletNew, body), body, ""},
		{"an unsigned event is refused", nil, body, "the event is unsigned"},
		{"an event signed by a key nobody trusts is refused", signed(stranger, body), body, "not trusted"},
		{"an event signed by another service is refused", signed(gl, body), body, "only wallet publishes these events"},
		{"a real signature over altered bytes is refused", signed(walletOld, body), []byte(strings.Replace(string(body), "100", "500000000", 1)), "does not match"},
		{"a signature that is not base64 is refused", nats.Header{signing.HeaderKeyID: {walletOld.Public().ID}, signing.HeaderSignature: {"%%%"}}, body, "not a base64 Ed25519 signature"},
		{"a signature without its key id is refused", nats.Header{signing.HeaderSignature: signed(walletOld, body)[signing.HeaderSignature]}, body, "not trusted"},
		{"another event's signature is refused", signed(walletOld, []byte(`{"id":"e2"}`)), body, "does not match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := trust.Verify(contract.SourceWallet, tc.body, tc.header)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, contract.ErrUnauthenticated)
			require.ErrorContains(t, err, tc.err)
		})
	}

	t.Run("a batch verifies each message as Verify does", func(t *testing.T) {
		// Every case above in one batch among 20 good messages: the bad ones make the batch's own
		// check fail, so each message is verified alone and only the bad ones are refused.
		var msgs []signing.Signed
		var want []string
		for range 20 {
			msgs = append(msgs, signing.Signed{Body: body, Header: signed(walletNew, body)})
			want = append(want, "")
		}
		for _, tc := range cases {
			msgs = append(msgs, signing.Signed{Body: tc.body, Header: tc.header})
			want = append(want, tc.err)
		}
		errs := trust.VerifyAll(contract.SourceWallet, msgs)
		require.Len(t, errs, len(msgs))
		for i, err := range errs {
			if want[i] == "" {
				require.NoError(t, err, "message %d", i)
				continue
			}
			require.ErrorIs(t, err, contract.ErrUnauthenticated, "message %d", i)
			require.ErrorContains(t, err, want[i], "message %d", i)
		}
		require.Equal(t, []error{nil}, trust.VerifyAll(contract.SourceWallet, msgs[:1]), "a batch of one")
		require.Empty(t, trust.VerifyAll(contract.SourceWallet, nil))
		require.Equal(t, make([]error, 2), signing.AcceptUnsigned().VerifyAll(contract.SourceWallet, []signing.Signed{{Body: body}, {Body: body}}))
	})
	t.Run("a signature is the one crypto/ed25519 makes, and crypto/ed25519 verifies it", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := signing.WriteKeyFiles(dir, walletOld)
		require.NoError(t, err)
		private, _ := signing.KeyFiles(dir, contract.SourceWallet)
		raw, err := os.ReadFile(private)
		require.NoError(t, err)
		block, _ := pem.Decode(raw)
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
		std := parsed.(ed25519.PrivateKey)
		header := signed(walletOld, body)
		sig, err := base64.StdEncoding.DecodeString(header.Get(signing.HeaderSignature))
		require.NoError(t, err)
		require.Equal(t, ed25519.Sign(std, body), sig, "the same deterministic signature crypto/ed25519 makes")
		require.True(t, ed25519.Verify(walletOld.Public().Key, body, sig))
	})

	require.NoError(t, signing.AcceptUnsigned().Verify(contract.SourceWallet, body, nil), "the insecure trust verifies nothing")
	_, err = signing.NewTrust(signing.PublicKey{Service: contract.SourceGL, ID: walletOld.Public().ID, Key: walletOld.Public().Key})
	require.NoError(t, err, "a key's id is its key's, whatever the service")
	_, err = signing.NewTrust(signing.PublicKey{Service: contract.SourceGL, ID: "0123456789abcdef", Key: gl.Public().Key})
	require.ErrorContains(t, err, "is not its key's")
}

// BenchmarkSignAndVerify is the cost signing adds to each event: the relay's Sign and the
// consumer's Verify of a TransferCompleted.v1 envelope, headers included.
func BenchmarkSignAndVerify(b *testing.B) {
	key, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(b, err)
	trust, err := signing.NewTrust(key.Public())
	require.NoError(b, err)
	data, err := json.Marshal(contract.TransferCompleted{TransferID: uuid.NewString(), FromWalletID: "u123", ToWalletID: "u456",
		Amount: 4200, Currency: "USD", CreatedAt: time.Now().UTC()})
	require.NoError(b, err)
	body, err := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: uuid.NewString(), Source: contract.SourceWallet,
		Type: contract.TypeTransferCompleted, Subject: uuid.NewString(), Time: time.Now().UTC(), DataContentType: "application/json", Data: data})
	require.NoError(b, err)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			key.Sign(&nats.Msg{Data: body})
		}
	})
	msg := &nats.Msg{Data: body}
	key.Sign(msg)
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if err := trust.Verify(contract.SourceWallet, msg.Data, msg.Header); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify a batch of 100", func(b *testing.B) {
		batch := make([]signing.Signed, 100)
		for i := range batch {
			m := &nats.Msg{Data: append(slices.Clone(body), byte('0'+i%10))}
			key.Sign(m)
			batch[i] = signing.Signed{Body: m.Data, Header: m.Header}
		}
		for b.Loop() {
			for _, err := range trust.VerifyAll(contract.SourceWallet, batch) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
	})
	b.ReportMetric(float64(len(body)), "envelope-bytes")
}
