package console_test

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// badge is one count of the header's verdict as a page shows it.
type badge struct {
	href, value string
	alert       bool
}

var badgeRE = regexp.MustCompile(`<a href="([^"]*)" class="hb( alert)?" data-health="([^"]+)"[^>]*>[^<]*<strong>([^<]*)</strong></a>`)

// badgesOf reads the header's verdict out of a page.
func badgesOf(t *testing.T, page string) map[string]badge {
	t.Helper()
	out := map[string]badge{}
	for _, m := range badgeRE.FindAllStringSubmatch(page, -1) {
		out[m[3]] = badge{href: html.UnescapeString(m[1]), value: m[4], alert: m[2] != ""}
	}
	require.Len(t, out, 5, "the header has the verdict's five badges: %s", page)
	return out
}

func insertOutbox(t *testing.T, pool *pgxpool.Pool, status, eventType string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := pool.Exec(context.Background(), `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error, next_attempt_at,
		                    acknowledged_at, dispatched_at, lease_owner, lease_until)
		VALUES ($1, $3, $2, '{}', $4,
		        CASE WHEN $4 IN ('failed', 'dead_letter') THEN 4 ELSE 0 END,
		        CASE WHEN $4 IN ('failed', 'dead_letter') THEN 'broker refused' END,
		        CASE WHEN $4 = 'failed' THEN now() + interval '1 minute' END,
		        CASE WHEN $4 = 'acknowledged' THEN now() END,
		        CASE WHEN $4 IN ('dispatched', 'acknowledged') THEN now() END,
		        CASE WHEN $4 = 'dispatching' THEN 'relay-1' END,
		        CASE WHEN $4 = 'dispatching' THEN now() + interval '30 seconds' END)`,
		id, "agg-"+id.String(), eventType, status)
	require.NoError(t, err)
	return id
}

func insertWaitingInbox(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, waits_for, payload)
		VALUES ('wallet:w1', 'wallet', 'w1', 'TransferReversed.v1', 'waiting', 'transfer:x', '\x00')`)
	require.NoError(t, err)
}

// Every page's header says what needs a look, each count linked to its rows and coloured only
// when it is not zero: healthy, a failed row, a dead letter, a waiting inbox event.
func TestEveryPagesHeaderCountsTheRowsThatNeedALook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		arrange func(t *testing.T, pool *pgxpool.Pool)
		alerts  map[string]string // badge → its value; every other count is 0
	}{
		{"a healthy pipeline colours nothing", func(t *testing.T, pool *pgxpool.Pool) {
			insertOutbox(t, pool, "acknowledged", "TransferCompleted.v2")
		}, map[string]string{}},
		{"a failed outbox row is counted", func(t *testing.T, pool *pgxpool.Pool) {
			insertOutbox(t, pool, "failed", "TransferCompleted.v2")
		}, map[string]string{"outbox-failed": "1", "oldest-unacknowledged": ""}},
		{"a dead letter is counted although nothing else waits", func(t *testing.T, pool *pgxpool.Pool) {
			insertDeadLetter(t, pool)
		}, map[string]string{"outbox-dead_letter": "1"}},
		{"a waiting inbox event is counted", func(t *testing.T, pool *pgxpool.Pool) {
			insertWaitingInbox(t, pool)
		}, map[string]string{"inbox-waiting": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tc.arrange(t, b.pool)
			c := b.browser(t)
			b.login(t, c, b.admin)
			for _, path := range []string{"/console/", "/console/inbox", "/console/pipeline"} {
				var header []string
				if path == "/console/pipeline" {
					header = []string{"X-Console-Fragment", "1"}
				}
				a := b.get(t, c, path, header...)
				require.Equal(t, 200, a.status, path)
				badges := badgesOf(t, a.body)
				require.Equal(t, "/console/outbox?status=failed", badges["outbox-failed"].href)
				require.Equal(t, "/console/outbox?status=dead_letter", badges["outbox-dead_letter"].href)
				require.Equal(t, "/console/inbox?status=failed", badges["inbox-failed"].href)
				require.Equal(t, "/console/inbox?status=waiting", badges["inbox-waiting"].href)
				require.Equal(t, "/console/outbox", badges["oldest-unacknowledged"].href)
				for name, got := range badges {
					want, alert := tc.alerts[name]
					if name == "oldest-unacknowledged" {
						// The metrics registry of this test has no outbox collector: the age reads none.
						require.Equal(t, "none", got.value, "%s on %s", name, path)
						continue
					}
					require.Equal(t, alert, got.alert, "%s on %s is coloured only when not zero", name, path)
					if !alert {
						want = "0"
					}
					require.Equal(t, want, got.value, "%s on %s", name, path)
				}
			}
		})
	}
}

// The outbox page opens on every row not acknowledged, whatever its status, with a link for
// each status and for all; each row links to the trace of its aggregate, whatever its type.
func TestTheOutboxPageOpensOnTheRowsNotAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acked := insertOutbox(t, b.pool, "acknowledged", "TransferCompleted.v2")
	pending := insertOutbox(t, b.pool, "pending", "HoldPlaced.v1")
	failed := insertOutbox(t, b.pool, "failed", "TransferReversed.v1")
	dead := insertDeadLetter(t, b.pool)
	c := b.browser(t)
	b.login(t, c, b.admin)

	a := b.get(t, c, "/console/outbox")
	require.Equal(t, 200, a.status)
	for _, id := range []uuid.UUID{pending, failed, dead} {
		require.Contains(t, a.body, `href="/console/outbox/`+id.String()+`"`)
	}
	require.NotContains(t, a.body, acked.String(), "an acknowledged row needs no look")
	require.Contains(t, a.body, `data-filter="unacknowledged" aria-current="page"`, "the default filter is marked")
	for _, s := range []string{"pending", "dispatching", "dispatched", "acknowledged", "failed", "dead_letter", "all"} {
		require.Contains(t, a.body, `href="/console/outbox?status=`+s+`" class="status s-`+s+`" data-filter="`+s+`"`)
	}
	require.Contains(t, a.body, `value="`+failed.String()+`"`, "a failed row can be chosen for a requeue")
	require.NotContains(t, a.body, `name="id" value="`+pending.String()+`"`, "a pending row cannot")
	for _, id := range []uuid.UUID{pending, failed} {
		require.Contains(t, a.body, `href="/console/transfers/agg-`+id.String()+`" data-trace=`, "every event type links to its trace")
	}
	require.Contains(t, a.body, "attempt 4 of 10")

	all := b.get(t, c, "/console/outbox?status=all")
	require.Equal(t, 200, all.status)
	require.Contains(t, all.body, acked.String())
	require.Equal(t, 4, strings.Count(all.body, `<td><a href="/console/outbox/`))
}

// An outbox row's page says which attempt of the maximum it is at, when the next one is, and
// the history of its refusals, which a requeue keeps.
func TestAnOutboxRowShowsItsAttemptsAndAHistoryThatARequeueKeeps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := insertOutbox(t, b.pool, "pending", "TransferCompleted.v2")
	ctx := context.Background()
	for _, cause := range []string{"first refusal", "second refusal"} {
		_, err := b.pool.Exec(ctx, `UPDATE outbox SET status = 'dispatching', attempts = attempts + 1, lease_owner = 'r', lease_until = now() + interval '1 minute' WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `UPDATE outbox SET status = CASE WHEN attempts >= 2 THEN 'dead_letter' ELSE 'failed' END, last_error = $2,
			next_attempt_at = now() + interval '1 minute', lease_owner = NULL, lease_until = NULL,
			attempt_history = outbox_history_push(attempt_history, jsonb_build_object('attempt', attempts,
			    'status', CASE WHEN attempts >= 2 THEN 'dead_letter' ELSE 'failed' END, 'error', $2::text, 'at', clock_timestamp()))
			WHERE id = $1`, id, cause)
		require.NoError(t, err)
	}
	c := b.browser(t)
	b.login(t, c, b.admin)
	page := b.get(t, c, "/console/outbox/"+id.String())
	require.Equal(t, 200, page.status)
	require.Contains(t, page.body, `<dd data-field="attempts">attempt 2 of 10</dd>`)
	require.Contains(t, page.body, "a requeue starts them again")

	form := b.post(t, c, "/console/outbox/requeue", url.Values{"csrf": {csrfOf(t, page.body)}, "id": {id.String()}, "confirm": {"yes"}})
	require.Equal(t, 303, form.status)
	page = b.get(t, c, "/console/outbox/"+id.String())
	require.Contains(t, page.body, `<dd data-field="attempts">no attempt yet</dd>`)
	history := page.body[strings.Index(page.body, `data-field="attempt-history"`):]
	require.Contains(t, history, "first refusal")
	require.Contains(t, history, "second refusal")
	require.Contains(t, history, "requeued by an operator after 2 attempts")
}
