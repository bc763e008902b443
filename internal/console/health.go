package console

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/events/admin"
	"walletgl/internal/metrics"
)

// healthView is the header's verdict: each count of rows that need a look, linked to them.
type healthView struct {
	Items       []healthItem
	Unavailable bool // the database could not be asked: the counts are unknown, not zero
	Remote      *remoteHealthView
}

// remoteHealthView is the other service's rows that need a look, as its metrics read them.
type remoteHealthView struct {
	Name  string
	Items []healthItem
	// Unknown says why there are no counts (its metrics could not be read, or carry none):
	// never shown as zeros.
	Unknown string
}

// healthItem is one badge: its count (or age), the page of the rows it counts, and Alert when
// it is not zero (the only badges coloured).
type healthItem struct {
	Name  string // stable, for tests and styles: outbox-failed, outbox-dead_letter, …
	Label string
	Value string
	Href  string
	Title string
	Alert bool
}

// health reads the verdict for a request of principal: nil when the service gives none or the
// key acts for an owner (the counts are of every owner's rows).
func (c *Console) health(ctx context.Context, principal auth.Principal, oldest time.Duration, remote *remoteReading) *healthView {
	if c.cfg.Health == nil || principal.Owner != "" {
		return nil
	}
	h, err := c.cfg.Health(ctx)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("console: count the rows that need a look")
		return &healthView{Unavailable: true, Remote: c.remoteHealth(ctx, remote)}
	}
	return &healthView{Items: healthItems(h, oldest), Remote: c.remoteHealth(ctx, remote)}
}

// remoteHealth reads the other service's rows that need a look from its metrics (the reading
// the pipeline header took, or a new one when it took none); nil when there is no other service.
func (c *Console) remoteHealth(ctx context.Context, read *remoteReading) *remoteHealthView {
	r := c.cfg.Remote
	if r == nil || c.pipeline.remote == nil {
		return nil
	}
	if read == nil {
		t, err := c.pipeline.readRemote(ctx)
		read = &remoteReading{totals: t, err: err}
	}
	v := &remoteHealthView{Name: r.Name}
	switch {
	case read.err != nil:
		zerolog.Ctx(ctx).Debug().Err(read.err).Msg("console: read the other service's rows that need a look")
		v.Unknown = "unreachable"
	case read.totals.Backlog == nil:
		v.Unknown = "unknown (its metrics carry no counts)"
	default:
		v.Items = remoteHealthItems(r, *read.totals.Backlog)
	}
	return v
}

// remoteHealthItems are the other service's badges, linked to its console's pages.
func remoteHealthItems(r *Remote, b metrics.Backlog) []healthItem {
	base := strings.TrimRight(r.URL, "/")
	count := func(name, label, path, title string, n float64, capped bool) healthItem {
		c := admin.Count{N: int64(n), AtLeast: capped && int64(n) >= admin.HealthCap}
		return healthItem{Name: name, Label: label, Value: c.String(), Href: base + path,
			Title: r.Name + ": " + title, Alert: c.N > 0}
	}
	return []healthItem{
		count("outbox-failed", "outbox failed", "/console/outbox?status=failed",
			"outbox rows the broker refused, retried after a backoff", b.OutboxFailed, false),
		count("outbox-dead_letter", "outbox dead letters", "/console/outbox?status=dead_letter",
			"outbox rows that wait for an operator's requeue", b.OutboxDeadLetter, false),
		count("inbox-failed", "inbox failed", "/console/inbox?status=failed",
			"events its inbox recorded failed (its dead letters), with a reason word", b.InboxFailed, true),
		count("inbox-waiting", "inbox waiting", "/console/inbox?status=waiting",
			"events parked until what they wait for posts", b.InboxWaiting, false),
	}
}

// healthItems are the verdict's badges, in the order of the header.
func healthItems(h admin.Health, oldest time.Duration) []healthItem {
	count := func(name, label, href, title string, c admin.Count) healthItem {
		return healthItem{Name: name, Label: label, Value: c.String(), Href: href, Title: title, Alert: c.N > 0}
	}
	return []healthItem{
		count("outbox-failed", "outbox failed", "/console/outbox?status=failed",
			"outbox rows the broker refused, retried after a backoff", h.OutboxFailed),
		count("outbox-dead_letter", "outbox dead letters", "/console/outbox?status=dead_letter",
			"outbox rows refused EVENTS_MAX_ATTEMPTS times: they wait for an operator's requeue", h.OutboxDeadLetter),
		count("inbox-failed", "inbox failed", "/console/inbox?status=failed",
			"events the inbox recorded failed (its dead letters), with a reason word", h.InboxFailed),
		count("inbox-waiting", "inbox waiting", "/console/inbox?status=waiting",
			"events parked until what they wait for posts", h.InboxWaiting),
		{Name: "oldest-unacknowledged", Label: "oldest unacknowledged", Value: formatAge(oldest), Href: "/console/outbox",
			Title: "the age of the oldest outbox row not yet acknowledged (dead letters aside): the outbox page lists them oldest first",
			Alert: oldest > 0},
	}
}

// header is every page's header for the request of ctx: the pipeline's numbers and, for a key
// that may see every owner's rows, the verdict.
func (c *Console) header(ctx context.Context) pipelineView {
	v := c.pipeline.read(ctx)
	if p, ok := auth.FromContext(ctx); ok {
		v.Health = c.health(ctx, p, v.OldestAge, v.remote)
	}
	return v
}
