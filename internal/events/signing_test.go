package events_test

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/internal/eventsdb"
)

func TestKeyFilesRoundTripAndAreNeverOverwritten(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	key, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	private, public, err := events.WriteKeyFiles(dir, key)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "wallet.key"), private)
	require.Equal(t, filepath.Join(dir, "wallet.pub"), public)
	info, err := os.Stat(private)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the private key is the owner's alone")
	raw, err := os.ReadFile(public)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "Service: wallet\nKey-Id: "+key.Public().ID+"\n-----BEGIN PUBLIC KEY-----\n"), string(raw))

	read, err := events.ReadSigningKey(private)
	require.NoError(t, err)
	require.Equal(t, key.Public(), read.Public())
	pub, err := events.ReadPublicKey(public)
	require.NoError(t, err)
	require.Equal(t, key.Public(), pub)
	require.Len(t, pub.ID, 16)

	other, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	_, _, err = events.WriteKeyFiles(dir, other)
	require.ErrorContains(t, err, "never overwritten")
	again, err := events.ReadSigningKey(private)
	require.NoError(t, err)
	require.Equal(t, key.Public(), again.Public(), "the first key is intact")

	_, err = events.GenerateKey("bank")
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
		k, err := events.ReadPublicKey(write("openssl.pub", "Service: gl\n"+block))
		require.NoError(t, err)
		require.Equal(t, events.SourceGL, k.Service)
		require.Equal(t, events.KeyID(pub), k.ID)
		s, err := events.ReadSigningKey(write("openssl.key", "Service: gl\n"+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))))
		require.NoError(t, err)
		require.Equal(t, k, s.Public())
	})
	t.Run("a key without its service is refused", func(t *testing.T) {
		_, err := events.ReadPublicKey(write("bare.pub", block))
		require.ErrorContains(t, err, "Service")
	})
	t.Run("a key id that is not the key's is refused", func(t *testing.T) {
		_, err := events.ReadPublicKey(write("edited.pub", "Service: gl\nKey-Id: 0000000000000000\n"+block))
		require.ErrorContains(t, err, "is not its key's id")
	})
	t.Run("a private key is not a public key", func(t *testing.T) {
		_, err := events.ReadPublicKey(write("swapped.pub", "Service: gl\n"+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))))
		require.ErrorContains(t, err, `no PEM block "PUBLIC KEY"`)
	})
}

func TestTrustAcceptsAnEventOnlyFromItsProducer(t *testing.T) {
	t.Parallel()
	walletOld, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	walletNew, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	gl, err := events.GenerateKey(events.SourceGL)
	require.NoError(t, err)
	stranger, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	// Two keys of the wallet while it rotates, and the GL's.
	trust, err := events.NewTrust(walletOld.Public(), walletNew.Public(), gl.Public())
	require.NoError(t, err)
	body := []byte(`{"specversion":"1.0","id":"e1","type":"TransferCompleted.v1","data":{"amount":100}}`)
	signed := func(k *events.SigningKey, b []byte) nats.Header {
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
		{"a signature that is not base64 is refused", nats.Header{events.HeaderKeyID: {walletOld.Public().ID}, events.HeaderSignature: {"%%%"}}, body, "not a base64 Ed25519 signature"},
		{"a signature without its key id is refused", nats.Header{events.HeaderSignature: signed(walletOld, body)[events.HeaderSignature]}, body, "not trusted"},
		{"another event's signature is refused", signed(walletOld, []byte(`{"id":"e2"}`)), body, "does not match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := trust.Verify(events.SourceWallet, tc.body, tc.header)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, events.ErrUnauthenticated)
			require.ErrorContains(t, err, tc.err)
		})
	}

	t.Run("a batch verifies each message as Verify does", func(t *testing.T) {
		// Every case above in one batch among 20 good messages: the bad ones make the batch's own
		// check fail, so each message is verified alone and only the bad ones are refused.
		var msgs []events.Signed
		var want []string
		for range 20 {
			msgs = append(msgs, events.Signed{Body: body, Header: signed(walletNew, body)})
			want = append(want, "")
		}
		for _, tc := range cases {
			msgs = append(msgs, events.Signed{Body: tc.body, Header: tc.header})
			want = append(want, tc.err)
		}
		errs := trust.VerifyAll(events.SourceWallet, msgs)
		require.Len(t, errs, len(msgs))
		for i, err := range errs {
			if want[i] == "" {
				require.NoError(t, err, "message %d", i)
				continue
			}
			require.ErrorIs(t, err, events.ErrUnauthenticated, "message %d", i)
			require.ErrorContains(t, err, want[i], "message %d", i)
		}
		require.Equal(t, []error{nil}, trust.VerifyAll(events.SourceWallet, msgs[:1]), "a batch of one")
		require.Empty(t, trust.VerifyAll(events.SourceWallet, nil))
		require.Equal(t, make([]error, 2), events.AcceptUnsigned().VerifyAll(events.SourceWallet, []events.Signed{{Body: body}, {Body: body}}))
	})
	t.Run("a signature is the one crypto/ed25519 makes, and crypto/ed25519 verifies it", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := events.WriteKeyFiles(dir, walletOld)
		require.NoError(t, err)
		private, _ := events.KeyFiles(dir, events.SourceWallet)
		raw, err := os.ReadFile(private)
		require.NoError(t, err)
		block, _ := pem.Decode(raw)
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
		std := parsed.(ed25519.PrivateKey)
		header := signed(walletOld, body)
		sig, err := base64.StdEncoding.DecodeString(header.Get(events.HeaderSignature))
		require.NoError(t, err)
		require.Equal(t, ed25519.Sign(std, body), sig, "the same deterministic signature crypto/ed25519 makes")
		require.True(t, ed25519.Verify(walletOld.Public().Key, body, sig))
	})

	require.NoError(t, events.AcceptUnsigned().Verify(events.SourceWallet, body, nil), "the insecure trust verifies nothing")
	_, err = events.NewTrust(events.PublicKey{Service: events.SourceGL, ID: walletOld.Public().ID, Key: walletOld.Public().Key})
	require.NoError(t, err, "a key's id is its key's, whatever the service")
	_, err = events.NewTrust(events.PublicKey{Service: events.SourceGL, ID: "0123456789abcdef", Key: gl.Public().Key})
	require.ErrorContains(t, err, "is not its key's")
}

func TestAConsumerNeedsTrustedKeysForItsProducer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := events.ConsumerSpec{Name: "gl", Source: events.SourceWallet, EventType: events.TypeTransferCompleted}
	h := events.HandlerFunc(func(context.Context, pgx.Tx, events.Envelope) error { return nil })
	_, err := events.NewConsumer(events.ConsumerConfig{ConsumerSpec: spec}, b.topo, b.nc, b.pool, h, b.log)
	require.ErrorContains(t, err, "no trusted keys")
	spec.Source = events.SourceGL
	_, err = events.NewConsumer(events.ConsumerConfig{ConsumerSpec: spec, Trust: b.keys.Trust}, b.topo, b.nc, b.pool, h, b.log)
	require.ErrorContains(t, err, "TransferCompleted.v1 comes from wallet, not from gl's stream")
	_, err = events.NewRelay(events.RelayConfig{Source: events.SourceWallet, Signer: b.keys.GL}, b.topo, b.pool, b.nc, b.log)
	require.ErrorContains(t, err, "the signing key is gl's")
}

// Issue 13: anyone could publish on the wallet's subject and have the GL post it. Forged
// events — unsigned, signed with an unknown key, signed by the other service, a real event's
// signature over altered bytes — are recorded failed, reason unauthenticated, each under an
// inbox id of its own, and never reach the handler; a forgery that names a real event's id
// before the real event arrives does not keep the real one from being applied; the real
// events still flow; none of the forgeries is retried by an operator.
func TestForgedEventsAreRecordedUnauthenticatedAndNeverApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	subject := b.topo.Subject(events.SourceWallet, events.TypeTransferCompleted)
	ids := b.addEvents(t, 3)
	real, err := eventsdb.New(b.pool).GetOutbox(ctx, ids[0])
	require.NoError(t, err)
	stranger, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)

	forged := func(id uuid.UUID, amount int64) []byte {
		return envelopeBody(t, id, events.TransferCompleted{TransferID: "made-up", FromWalletID: "a", ToWalletID: "b",
			Amount: amount, Currency: "CHF", CreatedAt: time.Now()})
	}
	publish := func(body []byte, h nats.Header) {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Data = body
		for k, v := range h {
			msg.Header[k] = v
		}
		_, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(uuid.NewString()))
		require.NoError(t, err)
	}
	signedBy := func(k *events.SigningKey, body []byte) nats.Header {
		msg := &nats.Msg{Data: body}
		k.Sign(msg)
		return msg.Header
	}
	// The real event's signature, as its relay will publish it, on altered bytes.
	realHeader := signedBy(b.keys.Wallet, real.Payload)
	altered := []byte(strings.Replace(string(real.Payload), `"USD"`, `"CHF"`, 1))
	require.NotEqual(t, string(real.Payload), string(altered))

	// Before the real events are published, a forgery that names the second one's id.
	publish(forged(ids[1], 5_000_000_00), nil)
	strangerBody := forged(uuid.New(), 5_000_000_00)
	publish(strangerBody, signedBy(stranger, strangerBody))
	glBody := forged(uuid.New(), 5_000_000_00)
	publish(glBody, signedBy(b.keys.GL, glBody))
	publish(altered, realHeader)
	_, err = b.relay(t, events.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)

	var mu sync.Mutex
	var applied []string
	c := b.consumer(t, "gl", events.HandlerFunc(func(_ context.Context, _ pgx.Tx, env events.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, env.ID)
		return nil
	}))
	require.NoError(t, c.Unauthenticated(ctx))
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { s := c.Stats(); return s.Processed == 3 && s.Failed == 4 }, 20*time.Second, 20*time.Millisecond)
	stop()
	require.ElementsMatch(t, []string{ids[0].String(), ids[1].String(), ids[2].String()}, applied, "only the real events reach the handler")
	require.Equal(t, int64(4), c.Stats().Unauthenticated)
	require.ErrorContains(t, c.Unauthenticated(ctx), "4 events recorded failed as unauthenticated", "health warns")

	rows, err := eventsdb.New(b.pool).ListInbox(ctx, eventsdb.ListInboxParams{Status: "failed", RowLimit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 4)
	details := map[string]bool{}
	for _, row := range rows {
		require.Equal(t, events.ReasonUnauthenticated, *row.Reason)
		require.True(t, strings.HasPrefix(row.ID, "gl:unauthenticated-"), "a forgery never takes a real event's inbox row: %s", row.ID)
		require.NotEmpty(t, row.Payload, "kept for the record")
		details[strings.SplitN(*row.Detail, ": ", 2)[1]] = true
	}
	for _, want := range []string{"the event is unsigned", "which is not trusted", "only wallet publishes these events", "does not match the event's bytes"} {
		found := false
		for d := range details {
			found = found || strings.Contains(d, want)
		}
		require.True(t, found, "a failure says %q: %v", want, details)
	}
	for _, id := range ids {
		row, err := eventsdb.New(b.pool).GetInbox(ctx, "gl:"+id.String())
		require.NoError(t, err)
		require.Equal(t, events.StatusProcessed, row.Status, "the real event %s is applied", id)
	}

	out := events.NewInbox("gl", events.HandlerFunc(func(context.Context, pgx.Tx, events.Envelope) error {
		t.Error("a forgery reached the handler through a retry")
		return nil
	})).Retry(ctx, b.pool, rows[0].ID)
	require.Len(t, out, 1)
	require.Contains(t, out[0].Error, "never retried")
	again, err := eventsdb.New(b.pool).GetInbox(ctx, rows[0].ID)
	require.NoError(t, err)
	require.Equal(t, "failed", again.Status)
}

// Key rotation: the consumer trusts the old and the new key of its producer at once, so events
// signed before and after the producer switched keys are all applied; a key dropped from the
// trust is no longer accepted.
func TestEventsSignedWithEitherOfTwoTrustedKeysAreApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rotated, err := events.GenerateKey(events.SourceWallet)
	require.NoError(t, err)
	before := b.addEvents(t, 3)
	_, err = b.relay(t, events.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)
	after := b.addEvents(t, 3)
	_, err = b.relay(t, events.RelayConfig{Signer: rotated}).DispatchOnce(ctx)
	require.NoError(t, err)

	keyIDs := map[string]bool{}
	stream, err := b.js.Stream(ctx, b.topo.StreamName(events.SourceWallet))
	require.NoError(t, err)
	for seq := uint64(1); seq <= 6; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		keyIDs[msg.Header.Get(events.HeaderKeyID)] = true
		sig, err := base64.StdEncoding.DecodeString(msg.Header.Get(events.HeaderSignature))
		require.NoError(t, err)
		require.Len(t, sig, ed25519.SignatureSize)
	}
	require.Equal(t, map[string]bool{b.keys.Wallet.Public().ID: true, rotated.Public().ID: true}, keyIDs, "the relay signs with its key and names it")

	trust, err := events.NewTrust(b.keys.Wallet.Public(), rotated.Public())
	require.NoError(t, err)
	h := events.HandlerFunc(func(context.Context, pgx.Tx, events.Envelope) error { return nil })
	c, err := events.NewConsumer(events.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "gl", Source: events.SourceWallet, EventType: events.TypeTransferCompleted},
		Trust:        trust,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Processed == 6 }, 20*time.Second, 20*time.Millisecond)
	stop()
	require.Zero(t, c.Stats().Failed)

	// The old key retired: a consumer that trusts only the new one refuses what the old signed.
	newOnly, err := events.NewTrust(rotated.Public())
	require.NoError(t, err)
	c, err = events.NewConsumer(events.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "replay", Source: events.SourceWallet, EventType: events.TypeTransferCompleted},
		Trust:        newOnly,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	stop = runInBackground(t, c.Run)
	require.Eventually(t, func() bool { s := c.Stats(); return s.Processed == 3 && s.Unauthenticated == 3 }, 20*time.Second, 20*time.Millisecond)
	stop()
	for _, id := range after {
		row, err := eventsdb.New(b.pool).GetInbox(ctx, "replay:"+id.String())
		require.NoError(t, err)
		require.Equal(t, events.StatusProcessed, row.Status)
	}
	for _, id := range before {
		_, err := eventsdb.New(b.pool).GetInbox(ctx, "replay:"+id.String())
		require.ErrorIs(t, err, pgx.ErrNoRows, "an event of the retired key is not applied")
	}
}

// BenchmarkSignAndVerify is the cost signing adds to each event: the relay's Sign and the
// consumer's Verify of a TransferCompleted.v1 envelope, headers included.
func BenchmarkSignAndVerify(b *testing.B) {
	key, err := events.GenerateKey(events.SourceWallet)
	require.NoError(b, err)
	trust, err := events.NewTrust(key.Public())
	require.NoError(b, err)
	data, err := json.Marshal(events.TransferCompleted{TransferID: uuid.NewString(), FromWalletID: "u123", ToWalletID: "u456",
		Amount: 4200, Currency: "USD", CreatedAt: time.Now().UTC()})
	require.NoError(b, err)
	body, err := json.Marshal(events.Envelope{SpecVersion: "1.0", ID: uuid.NewString(), Source: events.SourceWallet,
		Type: events.TypeTransferCompleted, Subject: uuid.NewString(), Time: time.Now().UTC(), DataContentType: "application/json", Data: data})
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
			if err := trust.Verify(events.SourceWallet, msg.Data, msg.Header); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify a batch of 100", func(b *testing.B) {
		batch := make([]events.Signed, 100)
		for i := range batch {
			m := &nats.Msg{Data: append(slices.Clone(body), byte('0'+i%10))}
			key.Sign(m)
			batch[i] = events.Signed{Body: m.Data, Header: m.Header}
		}
		for b.Loop() {
			for _, err := range trust.VerifyAll(events.SourceWallet, batch) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
	})
	b.ReportMetric(float64(len(body)), "envelope-bytes")
}
