package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/signing"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
)

// postedLine is what a replay must reproduce of each line: the same event, transfer, account,
// side, amount and currency (entry ids and posting times are new by nature).
type postedLine struct {
	EventID, TransferID, Account, Direction, Currency string
	Amount                                            int64
}

func postings(t *testing.T, pool *pgxpool.Pool) []postedLine {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT event_id, transfer_id, account_code, direction, currency, amount
		FROM gl_postings ORDER BY event_id, direction`)
	require.NoError(t, err)
	defer rows.Close()
	var out []postedLine
	for rows.Next() {
		var p postedLine
		require.NoError(t, rows.Scan(&p.EventID, &p.TransferID, &p.Account, &p.Direction, &p.Currency, &p.Amount))
		out = append(out, p)
	}
	require.NoError(t, rows.Err())
	return out
}

type replayBundle struct {
	natsURL, ns string
	topo        events.Topology
	nc          *nats.Conn
	js          jetstream.JetStream
	live        *pgxpool.Pool
	liveURL     string
	walletURL   string // the wallet API the replay checks its rebuild against
	keys        envtest.EventKeys
}

// newReplayBundle gives the test its own streams and a connection to them.
func newReplayBundle(t testing.TB) *replayBundle {
	t.Helper()
	b := &replayBundle{natsURL: envtest.NATSURL(t), keys: envtest.NewEventKeys(t)}
	b.ns = envtest.Namespace(t, b.natsURL)
	b.topo = events.Topology{Namespace: b.ns, MaxBytes: envtest.StreamMaxBytes}
	var err error
	b.nc, err = nats.Connect(b.natsURL)
	require.NoError(t, err)
	t.Cleanup(b.nc.Close)
	b.js, err = jetstream.New(b.nc)
	require.NoError(t, err)
	require.NoError(t, b.topo.EnsureStreams(context.Background(), b.js))
	return b
}

func (b *replayBundle) env(dbURL string) map[string]string {
	env := map[string]string{
		"GL_DATABASE_URL": dbURL, "NATS_URL": b.natsURL, "EVENTS_NAMESPACE": b.ns, "EVENTS_STREAM_MAX_BYTES": "16777216",
		"WALLET_URL": b.walletURL,
		"LOG_FORMAT": "json", "EVENTS_BATCH_SIZE": "7", // the live consumer's; a replay has --batch
	}
	for _, kv := range b.keys.Env(contract.SourceGL) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// publishRaw sends body on the wallet's subject under msgID, signed by signer (nil: unsigned).
func (b *replayBundle) publishRaw(t testing.TB, body []byte, msgID string, signer *signing.Key) {
	t.Helper()
	msg := nats.NewMsg(b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted))
	msg.Data = body
	if signer != nil {
		signer.Sign(msg)
	}
	_, err := b.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(msgID))
	require.NoError(t, err)
}

// publish sends a TransferCompleted envelope as the wallet's relay would, under msgID.
func (b *replayBundle) publish(t testing.TB, eventID uuid.UUID, transfer contract.TransferCompleted, msgID string) {
	t.Helper()
	data, err := json.Marshal(transfer)
	require.NoError(t, err)
	body, err := json.Marshal(contract.Envelope{
		SpecVersion: "1.0", ID: eventID.String(), Source: contract.SourceWallet, Type: contract.TypeTransferCompleted,
		Subject: transfer.TransferID, Time: transfer.CreatedAt, DataContentType: "application/json", Data: data,
	})
	require.NoError(t, err)
	b.publishRaw(t, body, msgID, b.keys.Wallet)
}

// startLive runs the live GL consumer on the live database until the returned stop is called.
func (b *replayBundle) startLive(t *testing.T) (stop func()) {
	t.Helper()
	ledger := postgres.NewLedger(b.live)
	consumer, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{
			Name: events.ConsumerGL, Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted,
			AckWait: 5 * time.Second, MaxDeliver: 5,
		},
		BatchSize: 5,
		Trust:     b.keys.Trust,
	}, b.topo, b.nc, b.live, posting.New(ledger, zerolog.Nop()), zerolog.Nop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func (b *replayBundle) waitForEntries(t *testing.T, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int64
		err := b.live.QueryRow(context.Background(), "SELECT count(*) FROM journal_entries").Scan(&got)
		return err == nil && got == n
	}, 30*time.Second, 50*time.Millisecond, "live GL never reached %d entries", n)
}

func TestReplayRebuildsTheLiveLedger(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	b.live, b.liveURL = envtest.MigratedPool(t, "gl")

	// 30 transfers in two currencies. Every fifth one is published again under another
	// Nats-Msg-Id (the broker keeps both; the inbox must drop the second), and the live
	// consumer is stopped and started again between the halves.
	const n = 30
	var made []gl.SourceTransfer // the wallet's transfers, all of them on the stream
	for i := range n {
		made = append(made, gl.SourceTransfer{ID: fmt.Sprintf("tr-%02d", i), Amount: int64(100 + i), Currency: []string{"USD", "EUR"}[i%2]})
	}
	_, b.walletURL = startWalletAPI(t, made...)
	publishRange := func(from, to int) {
		for i := from; i < to; i++ {
			id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", b.ns, i))
			transfer := contract.TransferCompleted{
				TransferID: made[i].ID, FromWalletID: "w-a", ToWalletID: "w-b",
				Amount: made[i].Amount, Currency: made[i].Currency, CreatedAt: time.Now().UTC(),
			}
			b.publish(t, id, transfer, id.String())
			if i%5 == 0 {
				b.publish(t, id, transfer, id.String()+"-republished")
			}
		}
	}
	stop := b.startLive(t)
	publishRange(0, n/2)
	b.waitForEntries(t, n/2)
	stop()
	publishRange(n/2, n)
	// A poison message: dead-lettered by both the live GL and the replay, posted by neither.
	b.publishRaw(t, []byte("{not json"), "poison-1", b.keys.Wallet)
	// A forgery: a made-up transfer of CHF 5,000,000, unsigned. The replay verifies as the live
	// GL does: recorded unauthenticated by both, posted by neither.
	forged, err := json.Marshal(contract.Envelope{
		SpecVersion: "1.0", ID: uuid.NewString(), Source: contract.SourceWallet, Type: contract.TypeTransferCompleted,
		Time: time.Now().UTC(), DataContentType: "application/json",
		Data: json.RawMessage(`{"transfer_id":"forged","from_wallet_id":"w-a","to_wallet_id":"w-b","amount":500000000,"currency":"CHF","created_at":"2026-01-01T00:00:00Z"}`),
	})
	require.NoError(t, err)
	b.publishRaw(t, forged, "forged-1", nil)
	stop = b.startLive(t)
	b.waitForEntries(t, n)
	stop()
	want := postings(t, b.live)
	require.Len(t, want, 2*n)

	t.Run("into an empty database it rebuilds the same postings", func(t *testing.T) {
		target := envtest.DatabaseURL(t)
		// Small batches, three transactions in flight: many rounds, copies and bad events in
		// batches committing at the same time.
		out, _, err := runGL(t, b.env(b.liveURL), "replay", "--from-start", "--batch", "3", "--concurrency", "3", "--into", target)
		require.NoError(t, err)
		t.Log(out)
		require.Contains(t, out, "events read          38\n") // 30 + 6 republished + 1 poison + 1 forged
		require.Contains(t, out, fmt.Sprintf("entries posted       %d\n", n))
		require.Contains(t, out, "duplicates skipped   6\n")
		require.Contains(t, out, "dead-lettered        2 ")
		require.Contains(t, out, "unauthenticated      1 ")
		require.Contains(t, out, "check against the wallet API "+b.walletURL)
		require.Contains(t, out, fmt.Sprintf("verdict: RECONCILED — %d transfers, %d entries", n, n))

		pool, err := database.Open(context.Background(), target, 2)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		require.Equal(t, want, postings(t, pool))

		var outbox int64
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT coalesce(sum(jsonb_array_length(payload->'data'->'postings')), 0) FROM outbox WHERE status = 'pending'").Scan(&outbox))
		require.Equal(t, int64(n), outbox, "acknowledgments are written but left unpublished")

		out, _, err = runGL(t, b.env(target), "verify")
		require.NoError(t, err, out)

		_, _, err = runGL(t, b.env(b.liveURL), "replay", "--from-start", "--into", target)
		require.ErrorContains(t, err, "already has 30 entries")

		// The replay's own consumer is gone; the live one is untouched.
		stream, err := b.js.Stream(context.Background(), b.topo.StreamName(contract.SourceWallet))
		require.NoError(t, err)
		names := stream.ConsumerNames(context.Background())
		var consumers []string
		for name := range names.Name() {
			consumers = append(consumers, name)
		}
		require.Equal(t, []string{events.ConsumerGL}, consumers)
	})

	t.Run("without --into it creates a database named after the current one", func(t *testing.T) {
		out, errOut, err := runGL(t, b.env(b.liveURL), "replay", "--from-start")
		require.NoError(t, err)
		m := regexp.MustCompile(`rebuilt database (\S+) from`).FindStringSubmatch(out)
		require.Len(t, m, 2, out)
		name := m[1]
		require.True(t, strings.HasPrefix(name, b.live.Config().ConnConfig.Database+"_replay_"), name)
		u, err := url.Parse(b.liveURL)
		require.NoError(t, err)
		u.Path = "/" + name
		target := u.String()
		t.Cleanup(func() { _ = database.Drop(context.Background(), target) })
		pool, err := database.Open(context.Background(), target, 2)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		require.Equal(t, want, postings(t, pool))
		require.Contains(t, errOut, `"message":"replay progress"`, "progress is logged when stderr is not a terminal")
	})

	t.Run("without trusted keys it refuses to replay", func(t *testing.T) {
		env := b.env(b.liveURL)
		delete(env, "EVENTS_TRUSTED_KEYS")
		_, _, err := runGL(t, env, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
		require.ErrorContains(t, err, "EVENTS_TRUSTED_KEYS is not set")
	})

	t.Run("a batch or a concurrency below 1 is refused", func(t *testing.T) {
		_, _, err := runGL(t, b.env(b.liveURL), "replay", "--from-start", "--batch", "0", "--into", envtest.DatabaseURL(t))
		require.ErrorContains(t, err, "--batch (0) and --concurrency (3) must be at least 1")
	})

	t.Run("without --from-start it refuses to guess", func(t *testing.T) {
		_, _, err := runGL(t, b.env(b.liveURL), "replay")
		require.ErrorContains(t, err, "--from-start")
	})
}

// TestReplayNamesTheHistoryTheStreamLost replays a stream that no longer holds its first
// events (purged, as limits retention or a lost store would leave it) and one event for a
// transfer the wallet never made.
func TestReplayNamesTheHistoryTheStreamLost(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	var made []gl.SourceTransfer
	for i := range 8 {
		made = append(made, gl.SourceTransfer{ID: uuid.NewString(), Amount: int64(10 + i), Currency: "USD"})
	}
	stranger := uuid.NewString()
	publish := func(tr gl.SourceTransfer) {
		id := uuid.New()
		b.publish(t, id, contract.TransferCompleted{TransferID: tr.ID, FromWalletID: "w-a", ToWalletID: "w-b",
			Amount: tr.Amount, Currency: tr.Currency, CreatedAt: time.Now().UTC()}, id.String())
	}
	for _, tr := range made {
		publish(tr)
	}
	publish(gl.SourceTransfer{ID: stranger, Amount: 99, Currency: "USD"})
	stream, err := b.js.Stream(context.Background(), b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	require.NoError(t, stream.Purge(context.Background(), jetstream.WithPurgeSequence(4)), "drop the events of stream sequences 1-3")
	lost := made[:3]

	wallet, apiURL := startWalletAPI(t, made...)
	b.walletURL = apiURL
	walletDB := walletDatabase(t, made)

	for _, source := range []struct{ name, key, url string }{
		{"the wallet's API", "WALLET_URL", apiURL},
		{"the wallet database's view", "GL_RECONCILE_WALLET_DATABASE_URL", walletDB},
	} {
		t.Run("checked against "+source.name+", the replay fails naming what is missing", func(t *testing.T) {
			env := b.env(envtest.DatabaseURL(t))
			env[source.key] = source.url
			out, _, err := runGL(t, env, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
			require.Error(t, err)
			t.Log(out)
			require.Contains(t, out, "entries posted       6\n")
			require.Contains(t, out, "verdict: NOT RECONCILED — 4 differences")
			require.Contains(t, out, "wallet outbox rebuild --since")
			require.ErrorContains(t, err, "replay: the rebuilt GL does not reconcile with the wallet: 3 transfers of the wallet have no entry, the stream no longer holds their events: ")
			require.ErrorContains(t, err, "entries for 1 transfers the wallet does not have: "+stranger)
			for _, tr := range lost {
				require.Contains(t, out, "MISSING   transfer "+tr.ID)
				require.ErrorContains(t, err, tr.ID)
			}
			require.Contains(t, out, "EXTRA     transfer "+stranger)
			require.NotContains(t, out, "next: ", "a rebuild that lacks history is not one to use")
		})
	}

	t.Run("a transfer the wallet makes after the replay read its listing is not taken for lost history", func(t *testing.T) {
		late := gl.SourceTransfer{ID: uuid.NewString(), Amount: 5, Currency: "USD"}
		wallet.addAfterNextListing(late)
		out, _, err := runGL(t, b.env(envtest.DatabaseURL(t)), "replay", "--from-start", "--into", envtest.DatabaseURL(t))
		require.ErrorContains(t, err, "3 transfers of the wallet have no entry")
		require.Contains(t, out, "verdict: NOT RECONCILED — 4 differences")
		require.NotContains(t, out, late.ID)
	})

	t.Run("--no-reconcile skips the check", func(t *testing.T) {
		env := b.env(envtest.DatabaseURL(t))
		env["WALLET_URL"] = "http://127.0.0.1:1"
		_, _, err := runGL(t, env, "replay", "--from-start", "--into", envtest.DatabaseURL(t))
		require.ErrorContains(t, err, "--no-reconcile skips the check", "an unreadable wallet fails the replay before it starts")

		out, _, err := runGL(t, env, "replay", "--from-start", "--no-reconcile", "--into", envtest.DatabaseURL(t))
		require.NoError(t, err)
		require.Contains(t, out, "entries posted       6\n")
		require.Contains(t, out, "check against the wallet: skipped (--no-reconcile)")
	})
}
