package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/config"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/serve"
)

// The status command of both binaries: the whole pipeline as the service sees it, on one screen.
// It reads the service's database (outbox, inbox, their last errors) and asks the broker for both
// durable consumers; a broker that does not answer is reported, and the rest is still shown.

// DefaultBrokerTimeout is how long status waits for the broker before it reports it unreachable.
const DefaultBrokerTimeout = 2 * time.Second

// StuckAfter is the age of the oldest unacknowledged outbox row from which status calls the
// outbox stuck: the threshold of the WalletglOutboxStuck alert (deploy/prometheus/alerts.yml).
const StuckAfter = 5 * time.Minute

// StatusWaitingShown is how many waiting inbox events status names, oldest first.
const StatusWaitingShown = 5

// Status is the pipeline's state as status prints it, and its JSON (--json).
type Status struct {
	Service          string              `json:"service"`
	Database         string              `json:"database"`
	Outbox           admin.OutboxStats   `json:"outbox"`
	OutboxLastError  *admin.OutboxError  `json:"outbox_last_error"` // null: no failed or dead_letter row
	Inbox            admin.InboxStats    `json:"inbox"`
	InboxLastFailure *admin.InboxFailure `json:"inbox_last_failure"` // null: no failed event
	// InboxWaiting is the oldest events parked until what they wait for posts (up to
	// StatusWaitingShown; Inbox.Counts["waiting"] counts them all).
	InboxWaiting []admin.InboxRow `json:"inbox_waiting"`
	Broker       BrokerStatus     `json:"broker"`
	// Attention lists what an operator should look at, each with the command to start with;
	// empty when nothing needs a human.
	Attention []string `json:"attention"`
}

// BrokerStatus and ConsumerStatus are the broker's part of the status (events.ReadBroker).
type (
	BrokerStatus   = events.BrokerStatus
	ConsumerStatus = events.ConsumerStatus
)

// Status is the status command.
func (svc Service[S]) Status(ctx context.Context, env Env, args []string) error {
	timeout := DefaultBrokerTimeout
	own := func(s *config.Set) {
		s.Flags().DurationVar(&timeout, "broker-timeout", DefaultBrokerTimeout, "how long to wait for the broker before reporting it unreachable")
	}
	return svc.Run(ctx, env, args, ReadOnly, own, func(c Call[S]) error {
		st := Status{Service: svc.Name, Database: c.Pool.Config().ConnConfig.Database}
		ops := admin.New(c.Pool)
		var err error
		if st.Outbox, err = ops.OutboxStats(ctx); err != nil {
			return err
		}
		if st.OutboxLastError, err = ops.LastOutboxError(ctx); err != nil {
			return err
		}
		if st.Inbox, err = ops.InboxStats(ctx); err != nil {
			return err
		}
		if st.InboxLastFailure, err = ops.LastInboxFailure(ctx); err != nil {
			return err
		}
		st.InboxWaiting = []admin.InboxRow{}
		if st.Inbox.Counts[contract.StatusWaiting] > 0 {
			if st.InboxWaiting, err = ops.ListInbox(ctx, contract.StatusWaiting, StatusWaitingShown); err != nil {
				return err
			}
			for i := range st.InboxWaiting {
				st.InboxWaiting[i].Payload = ""
			}
		}
		st.Broker = svc.brokerStatus(ctx, svc.EventsFunc(c.Settings), timeout)
		st.Attention = svc.attention(st)
		if c.JSON {
			return JSON(env.Stdout, st)
		}
		return writeStatus(env.Stdout, st)
	})
}

// brokerStatus asks the broker for both streams and both durable consumers, the ones of this
// service's events first, within timeout.
func (svc Service[S]) brokerStatus(ctx context.Context, ev serve.Events, timeout time.Duration) BrokerStatus {
	url := events.RedactURL(ev.Broker.URL)
	connectCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := ev.Broker.Connect(connectCtx, svc.Name+" status", events.OperatorUser, zerolog.Nop())
	if err != nil {
		return BrokerStatus{URL: url, Error: err.Error(), Streams: []events.StreamStatus{}, Consumers: []ConsumerStatus{}}
	}
	defer nc.Close()
	return ev.Topology.ReadBroker(ctx, nc, svc.Name, url, timeout)
}

// attention lists what needs an operator, each with the command to start with.
func (svc Service[S]) attention(st Status) []string {
	out := []string{}
	if n := st.Outbox.Counts["dead_letter"]; n > 0 {
		out = append(out, fmt.Sprintf("%d dead_letter outbox rows wait for an operator: %s outbox list --status dead_letter", n, svc.Name))
	}
	if st.Outbox.OldestUnacknowledgedAge >= StuckAfter {
		other := events.ConsumerGL
		if svc.Consumer == events.ConsumerGL {
			other = events.ConsumerWallet
		}
		out = append(out, fmt.Sprintf("the oldest unacknowledged outbox row is %s old: is %s serve running and consuming? (%s status)",
			st.Outbox.OldestUnacknowledgedAge.Round(time.Second), other, other))
	}
	if n := st.Inbox.Counts["failed"]; n > 0 {
		out = append(out, fmt.Sprintf("%d failed inbox events: %s inbox list, then %s inbox retry ID… once the cause is fixed; "+
			"one no retry can apply (malformed, conflict, unauthenticated) is resolved with a reason: %s inbox resolve ID… --reason \"…\", or in the console",
			n, svc.Name, svc.Name, svc.Name))
	}
	if n := st.Inbox.Counts[contract.StatusWaiting]; n > 0 && len(st.InboxWaiting) > 0 {
		if age := time.Since(st.InboxWaiting[0].ReceivedAt); age >= StuckAfter {
			out = append(out, fmt.Sprintf("%d inbox events wait for an event that has not posted, the oldest for %s: %s inbox list --status waiting; "+
				"%s inbox abandon ID… for one whose original will never come", n, age.Round(time.Second), svc.Name, svc.Name))
		}
	}
	if !st.Broker.Reachable {
		out = append(out, "the broker is unreachable: the relay and the consumer wait for it ("+svc.Name+" serve's log, /healthz)")
	}
	for _, c := range st.Broker.Consumers {
		if !c.Exists {
			out = append(out, fmt.Sprintf("the durable consumer %s on %s does not exist yet: it is created when %s serve starts", c.Name, c.Stream, c.Name))
		}
	}
	return out
}

// writeStatus prints st for people: one screen, outbox, broker, inbox, then what needs attention.
func writeStatus(w io.Writer, st Status) error {
	counts := func(statuses []string, counts map[string]int64) string {
		parts := make([]string, 0, len(statuses))
		for _, s := range statuses {
			parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
		}
		return strings.Join(parts, ", ")
	}
	rows := [][]string{
		{"outbox", counts(contract.OutboxStatuses, st.Outbox.Counts)},
		{"  oldest pending", age(st.Outbox.OldestPending, st.Outbox.OldestPendingAge)},
		{"  oldest unacknowledged", age(st.Outbox.OldestUnacknowledged, st.Outbox.OldestUnacknowledgedAge)},
		{"  last error", outboxError(st.OutboxLastError)},
	}
	if !st.Broker.Reachable {
		rows = append(rows, []string{"broker", "broker unreachable at " + st.Broker.URL + ": " + st.Broker.Error})
	}
	for _, s := range st.Broker.Streams {
		rows = append(rows, []string{fmt.Sprintf("stream %s (%s events)", s.Name, s.Source), s.Line()})
	}
	for _, c := range st.Broker.Consumers {
		rows = append(rows, []string{fmt.Sprintf("consumer %s of %s (this %s)", c.Name, c.Stream, c.Side), c.Line()})
	}
	rows = append(rows,
		[]string{"inbox", counts(contract.InboxStatuses, st.Inbox.Counts) + fmt.Sprintf("; duplicates absorbed %d", st.Inbox.Duplicates)},
		[]string{"  last failure", inboxFailure(st.InboxLastFailure)},
	)
	for _, r := range st.InboxWaiting {
		rows = append(rows, []string{"  waiting", fmt.Sprintf("%s (%s) since %s for %s", r.ID, r.EventType, r.ReceivedAt.UTC().Format(time.RFC3339), r.WaitsFor)})
	}
	fmt.Fprintf(w, "%s status: database %s, broker %s\n", st.Service, st.Database, st.Broker.URL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, r[0]+"\t"+r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Attention) == 0 {
		_, err := fmt.Fprintln(w, "attention: none")
		return err
	}
	fmt.Fprintln(w, "attention:")
	for _, a := range st.Attention {
		fmt.Fprintln(w, "  "+a)
	}
	return nil
}

func outboxError(e *admin.OutboxError) string {
	if e == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s at %s: %s", e.Status, e.ID, e.At.Format(time.RFC3339), Clip(e.Error, 100))
}

func inboxFailure(f *admin.InboxFailure) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s (%s) at %s: %s", f.Reason, f.ID, f.EventType, f.At.Format(time.RFC3339), Clip(f.Detail, 100))
}

// StatusHelp is the status command's line in both binaries' tables.
const StatusHelp = "the whole pipeline on one screen: outbox, broker consumers, inbox, last errors [--json]"
