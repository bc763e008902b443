package console_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/console"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet/glapi"
)

var remoteBadgeRE = regexp.MustCompile(`<a href="([^"]*)" class="hb( alert)?" data-remote-health="([^"]+)"[^>]*>[^<]*<strong>([^<]*)</strong></a>`)

// remoteBadgesOf reads the other service's group of the header out of a page.
func remoteBadgesOf(page string) map[string]badge {
	out := map[string]badge{}
	for _, m := range remoteBadgeRE.FindAllStringSubmatch(page, -1) {
		out[m[3]] = badge{href: html.UnescapeString(m[1]), value: html.UnescapeString(m[4]), alert: m[2] != ""}
	}
	return out
}

// glMetrics serves a GL's GET /metrics: its registry with the database gauges when sampled,
// reporting what backlog gives.
func glMetrics(t *testing.T, backlog *metrics.Backlog) string {
	t.Helper()
	m := metrics.New("gl")
	if backlog != nil {
		m.Sample(func(context.Context) (metrics.OutboxSample, error) {
			return metrics.OutboxSample{Rows: map[string]int64{"pending": 0, "failed": int64(backlog.OutboxFailed),
				"dead_letter": int64(backlog.OutboxDeadLetter)}}, nil
		})
		m.SampleInbox(1000, func(context.Context) (int64, error) { return int64(backlog.InboxFailed), nil })
		m.Consumer.Waiting(int64(backlog.InboxWaiting), time.Minute)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// The wallet console's header shows the GL's rows that need a look beside its own, read from
// the GL's metrics and linked to the GL console's pages; a GL that cannot be read says so,
// never as zeros.
func TestTheWalletHeaderShowsTheGLsRowsThatNeedALook(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name    string
		glURL   func(t *testing.T) string
		want    map[string]string // badge → its value; nil: no badge
		unknown string
	}{
		{"a failed and a waiting GL event are counted and coloured", func(t *testing.T) string {
			return glMetrics(t, &metrics.Backlog{InboxFailed: 1, InboxWaiting: 1})
		}, map[string]string{"outbox-failed": "0", "outbox-dead_letter": "0", "inbox-failed": "1", "inbox-waiting": "1"}, ""},
		{"the GL's outbox trouble is counted too, its inbox failed capped", func(t *testing.T) string {
			return glMetrics(t, &metrics.Backlog{OutboxFailed: 2, OutboxDeadLetter: 3, InboxFailed: 1000})
		}, map[string]string{"outbox-failed": "2", "outbox-dead_letter": "3", "inbox-failed": "1000+", "inbox-waiting": "0"}, ""},
		{"a GL that does not answer is unreachable, not zero", func(*testing.T) string { return closed.URL }, nil, "unreachable"},
		{"a GL whose metrics carry no counts is unknown, not zero", func(t *testing.T) string { return glMetrics(t, nil) },
			nil, "unknown (its metrics carry no counts)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			glURL := tc.glURL(t)
			b := setupConfig(t, func(cfg *console.Config) {
				cfg.RemoteTotals = glapi.New(glURL, "gl-key").Totals
				cfg.Remote = &console.Remote{Name: "GL", URL: glURL + "/"}
			})
			insertWaitingInbox(t, b.pool)
			c := b.browser(t)
			b.login(t, c, b.admin)
			id := insertOutbox(t, b.pool, "failed", "TransferCompleted.v2")
			for _, path := range []string{"/console/", "/console/outbox", "/console/outbox/" + id.String(), "/console/inbox",
				"/console/inbox?status=waiting", "/console/inbox/wallet:w1", "/console/pipeline"} {
				var header []string
				if path == "/console/pipeline" {
					header = []string{"X-Console-Fragment", "1"}
				}
				a := b.get(t, c, path, header...)
				require.Equal(t, 200, a.status, path)
				own := badgesOf(t, a.body)
				require.Equal(t, "1", own["inbox-waiting"].value, "the wallet's own verdict stays: %s", path)
				require.Equal(t, "1", own["outbox-failed"].value, path)
				require.Contains(t, a.body, `<li class="h-group">GL:</li>`, "the GL's group is labelled: %s", path)
				remote := remoteBadgesOf(a.body)
				if tc.unknown != "" {
					require.Empty(t, remote, "no count of a GL not read: %s", path)
					require.Regexp(t, `<li class="h-unknown" data-remote-unknown[^>]*>`+regexp.QuoteMeta(tc.unknown)+`</li>`, a.body, path)
					continue
				}
				require.NotContains(t, a.body, "data-remote-unknown", path)
				require.Len(t, remote, len(tc.want), path)
				for name, want := range tc.want {
					got := remote[name]
					require.Equal(t, want, got.value, "GL %s on %s", name, path)
					require.Equal(t, want != "0", got.alert, "GL %s on %s is coloured only when not zero", name, path)
				}
				for name, href := range map[string]string{
					"outbox-failed": "/console/outbox?status=failed", "outbox-dead_letter": "/console/outbox?status=dead_letter",
					"inbox-failed": "/console/inbox?status=failed", "inbox-waiting": "/console/inbox?status=waiting",
				} {
					require.Equal(t, glURL+href, remote[name].href, "GL %s links to the GL console's page", name)
				}
			}
		})
	}
}
