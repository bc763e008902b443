package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/console"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
)

func insertFailedInbox(t *testing.T, b *testBundle, reason string) string {
	t.Helper()
	eventID := uuid.NewString()
	id := events.ConsumerWallet + ":" + eventID
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, payload, attempts)
		VALUES ($1, $2, $3, 'TransferPosted.v1', 'failed', $4, 'the event says nothing usable', '{"not":"an envelope"}', 1)`,
		id, events.ConsumerWallet, eventID, reason)
	require.NoError(t, err)
	return id
}

func inboxStatus(t *testing.T, b *testBundle, id string) string {
	t.Helper()
	var status string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status FROM inbox WHERE id = $1`, id).Scan(&status))
	return status
}

// A row no retry can apply (malformed, conflict, unauthenticated) offers no Retry, and a retry
// asked for anyway is refused in a banner that is no success; it is resolved instead, with a
// reason the confirmation page asks for and a resolve without one refused. Once resolved it
// shows who, when and why, offers nothing more, is recorded in the audit trail and is no
// longer counted failed.
func TestAPoisonInboxEventIsResolvedNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poison := insertFailedInbox(t, b, contract.ReasonMalformed)
	exhausted := insertFailedInbox(t, b, contract.ReasonExhausted)
	c := b.browser(t)
	b.login(t, c, b.admin)

	for _, reason := range []string{contract.ReasonMalformed, contract.ReasonConflict, contract.ReasonUnauthenticated} {
		id := poison
		if reason != contract.ReasonMalformed {
			id = insertFailedInbox(t, b, reason)
		}
		page := b.get(t, c, "/console/inbox/"+id)
		require.Equal(t, http.StatusOK, page.status)
		require.NotContains(t, page.body, "Retry this event", "no Retry on a %s event", reason)
		require.Contains(t, page.body, "Resolve this event", reason)
	}
	page := b.get(t, c, "/console/inbox/"+exhausted)
	require.Contains(t, page.body, "Retry this event", "an exhausted event may succeed on a retry")
	require.Contains(t, page.body, "Resolve this event")
	list := b.get(t, c, "/console/inbox?status=failed")
	require.Contains(t, list.body, "Resolve selected")
	token := csrfOf(t, page.body)

	retry := b.post(t, c, "/console/inbox/retry", url.Values{"csrf": {token}, "id": {poison}, "confirm": {"yes"}, "back": {"/console/inbox/" + poison}})
	require.Equal(t, http.StatusSeeOther, retry.status)
	after := b.get(t, c, retry.header.Get("Location"))
	require.Contains(t, after.body, `data-flash="failed"`, "a refusal is no success banner")
	require.NotContains(t, after.body, `data-flash="done"`)
	require.Contains(t, after.body, "Not retried")
	require.Equal(t, "failed", inboxStatus(t, b, poison))

	form := url.Values{"csrf": {token}, "id": {poison}, "back": {"/console/inbox/" + poison}}
	confirm := b.post(t, c, "/console/inbox/resolve", form)
	require.Equal(t, http.StatusOK, confirm.status)
	require.Contains(t, confirm.body, "Resolve 1 failed inbox events?")
	require.Contains(t, confirm.body, `name="reason" required`)
	form.Set("confirm", "yes")
	refused := b.post(t, c, "/console/inbox/resolve", form)
	require.Equal(t, http.StatusBadRequest, refused.status, "a resolve needs a reason")
	require.Contains(t, refused.body, "needs a reason")
	require.Equal(t, "failed", inboxStatus(t, b, poison))

	form.Set("reason", "a test publisher sent it; nothing to post")
	done := b.post(t, c, "/console/inbox/resolve", form)
	require.Equal(t, http.StatusSeeOther, done.status)
	after = b.get(t, c, done.header.Get("Location"))
	require.Contains(t, after.body, `data-flash="done"`)
	require.Contains(t, after.body, "Resolved 1 of 1 events.")
	require.Contains(t, after.body, `data-field="status">resolved<`)
	require.Contains(t, after.body, "a test publisher sent it; nothing to post")
	require.NotContains(t, after.body, "Resolve this event")
	require.NotContains(t, after.body, "Retry this event")
	require.Equal(t, "resolved", inboxStatus(t, b, poison))

	var actor, detail string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT actor, detail::text FROM audit_log WHERE action = 'inbox.resolve' AND target = $1`, poison).
		Scan(&actor, &detail))
	require.Equal(t, "test", actor, "the audit trail names the session's key")
	require.Contains(t, detail, `"via": "console"`)
	require.Contains(t, detail, "nothing to post")

	again := b.post(t, c, "/console/inbox/resolve", form)
	after = b.get(t, c, again.header.Get("Location"))
	require.Contains(t, after.body, `data-flash="failed"`, "resolving a resolved row again is refused, in no success banner")
	require.Contains(t, after.body, "Refused "+poison+" (resolved)")

	home := b.get(t, c, "/console/")
	require.Contains(t, home.body, `data-count="inbox-resolved">1<`)
	require.Contains(t, home.body, `data-count="inbox-failed">3<`, "the resolved row is no longer counted failed")
}

// A requeue that moved nothing says so in a banner that is no success.
func TestARefusedRequeueIsNoSuccessBanner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.browser(t)
	b.login(t, c, b.admin)
	page := b.get(t, c, "/console/")
	missing := uuid.NewString()
	a := b.post(t, c, "/console/outbox/requeue", url.Values{"csrf": {csrfOf(t, page.body)}, "id": {missing}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, a.status)
	after := b.get(t, c, a.header.Get("Location"))
	require.Contains(t, after.body, `data-flash="failed"`)
	require.Contains(t, after.body, "Refused "+missing+" (no such row)")
	require.NotContains(t, after.body, `data-flash="done"`)
}

// The broker page shows both streams' messages, bytes and limits and both durable consumers'
// pending, ack pending and redelivered counts, as the status command reads them.
func TestTheBrokerPageShowsStreamsAndConsumers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	natsURL := envtest.NATSURL(t)
	nc, err := events.Connect(ctx, natsURL, t.Name(), zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := envtest.Topology(t, natsURL)
	require.NoError(t, topo.EnsureStreams(ctx, js))
	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	_, err = topo.EnsureConsumer(ctx, js, spec)
	require.NoError(t, err)
	for i := range 3 {
		msg := nats.NewMsg(topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted))
		msg.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		_, err := js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	b := setup(t, func(ev *console.Events) {
		ev.Broker = func(ctx context.Context) events.BrokerStatus {
			return topo.ReadBroker(ctx, nc, contract.SourceWallet, "nats://broker.test", 2*time.Second)
		}
	})
	c := b.browser(t)
	b.login(t, c, b.admin)
	home := b.get(t, c, "/console/")
	require.Contains(t, home.body, `href="/console/broker"`, "the navigation links the broker page")

	page := b.get(t, c, "/console/broker")
	require.Equal(t, http.StatusOK, page.status, page.body)
	walletStream, glStream := topo.StreamName(contract.SourceWallet), topo.StreamName(contract.SourceGL)
	require.Contains(t, page.body, `data-stream="`+walletStream+`"`)
	require.Contains(t, page.body, `data-stream="`+glStream+`"`)
	require.Regexp(t, `(?s)data-stream="`+walletStream+`".*?data-field="messages">3<.*?data-field="max_bytes">`+
		regexpQuote(events.FormatByteLimit(envtest.StreamMaxBytes))+`<.*?data-field="max_msgs">no limit<.*?data-field="max_age">7d<.*?data-field="discard">old<`, page.body)
	require.Regexp(t, `(?s)data-consumer="gl".*?data-field="pending">3<.*?data-field="ack_pending">0<.*?data-field="redelivered">0<`, page.body)
	require.Regexp(t, `(?s)data-consumer="wallet".*?not created yet`, page.body)

	st := topo.ReadBroker(ctx, nc, contract.SourceWallet, "nats://broker.test", 2*time.Second)
	require.True(t, st.Reachable)
	require.Contains(t, st.Streams[0].Line(), "3 messages", "the status command prints the same figures")
	require.Contains(t, st.Streams[0].Line(), "max age 7d, discard old")
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }
