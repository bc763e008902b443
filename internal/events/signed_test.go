package events_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
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
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
	"walletgl/internal/events/signing"
)

func TestAConsumerNeedsTrustedKeysForItsProducer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := events.ConsumerSpec{Name: "gl", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted}
	h := inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil })
	_, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec}, b.topo, b.nc, b.pool, h, b.log)
	require.ErrorContains(t, err, "no trusted keys")
	spec.Source = contract.SourceGL
	_, err = inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, Trust: b.keys.Trust}, b.topo, b.nc, b.pool, h, b.log)
	require.ErrorContains(t, err, "TransferCompleted.v1 comes from wallet, not from gl's stream")
	_, err = outbox.NewRelay(outbox.RelayConfig{Source: contract.SourceWallet, Signer: b.keys.GL}, b.topo, b.pool, b.nc, b.log)
	require.ErrorContains(t, err, "the signing key is gl's")
}

// Without signatures anyone could publish on the wallet's subject and have the GL post it. Forged
// events — unsigned, signed with an unknown key, signed by the other service, a real event's
// signature over altered bytes — are recorded failed, reason unauthenticated, each under an
// inbox id of its own, and never reach the handler; a forgery that names a real event's id
// before the real event arrives does not keep the real one from being applied; the real
// events still flow; none of the forgeries is retried by an operator.
func TestForgedEventsAreRecordedUnauthenticatedAndNeverApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)
	ids := b.addEvents(t, 3)
	real, err := eventsdb.New(b.pool).GetOutbox(ctx, ids[0])
	require.NoError(t, err)
	stranger, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)

	forged := func(id uuid.UUID, amount int64) []byte {
		return envelopeBody(t, id, contract.TransferCompleted{TransferID: "made-up", FromWalletID: "a", ToWalletID: "b",
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
	signedBy := func(k *signing.Key, body []byte) nats.Header {
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
	_, err = b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)

	var mu sync.Mutex
	var applied []string
	c := b.consumer(t, "gl", inbox.HandlerFunc(func(_ context.Context, _ pgx.Tx, env contract.Envelope) error {
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
		require.Equal(t, contract.ReasonUnauthenticated, *row.Reason)
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
		require.Equal(t, contract.StatusProcessed, row.Status, "the real event %s is applied", id)
	}

	out := inbox.New("gl", inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error {
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
	rotated, err := signing.GenerateKey(contract.SourceWallet)
	require.NoError(t, err)
	before := b.addEvents(t, 3)
	_, err = b.relay(t, outbox.RelayConfig{}).DispatchOnce(ctx)
	require.NoError(t, err)
	after := b.addEvents(t, 3)
	_, err = b.relay(t, outbox.RelayConfig{Signer: rotated}).DispatchOnce(ctx)
	require.NoError(t, err)

	keyIDs := map[string]bool{}
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	for seq := uint64(1); seq <= 6; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		keyIDs[msg.Header.Get(signing.HeaderKeyID)] = true
		sig, err := base64.StdEncoding.DecodeString(msg.Header.Get(signing.HeaderSignature))
		require.NoError(t, err)
		require.Len(t, sig, ed25519.SignatureSize)
	}
	require.Equal(t, map[string]bool{b.keys.Wallet.Public().ID: true, rotated.Public().ID: true}, keyIDs, "the relay signs with its key and names it")

	trust, err := signing.NewTrust(b.keys.Wallet.Public(), rotated.Public())
	require.NoError(t, err)
	h := inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil })
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "gl", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted},
		Trust:        trust,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool { return c.Stats().Processed == 6 }, 20*time.Second, 20*time.Millisecond)
	stop()
	require.Zero(t, c.Stats().Failed)

	// The old key retired: a consumer that trusts only the new one refuses what the old signed.
	newOnly, err := signing.NewTrust(rotated.Public())
	require.NoError(t, err)
	c, err = inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "replay", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted},
		Trust:        newOnly,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	stop = runInBackground(t, c.Run)
	require.Eventually(t, func() bool { s := c.Stats(); return s.Processed == 3 && s.Unauthenticated == 3 }, 20*time.Second, 20*time.Millisecond)
	stop()
	for _, id := range after {
		row, err := eventsdb.New(b.pool).GetInbox(ctx, "replay:"+id.String())
		require.NoError(t, err)
		require.Equal(t, contract.StatusProcessed, row.Status)
	}
	for _, id := range before {
		_, err := eventsdb.New(b.pool).GetInbox(ctx, "replay:"+id.String())
		require.ErrorIs(t, err, pgx.ErrNoRows, "an event of the retired key is not applied")
	}
}
