package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/events/contract"
)

// BrokerStatus is what the broker says of the pipeline: both streams' figures and limits, and
// both durable consumers'. The status command prints it and the console's broker page shows
// it; both read it with ReadBroker.
type BrokerStatus struct {
	URL       string           `json:"url"` // NATS_URL, passwords redacted
	Reachable bool             `json:"reachable"`
	Error     string           `json:"error,omitempty"` // why it is unreachable
	Streams   []StreamStatus   `json:"streams"`         // empty when unreachable
	Consumers []ConsumerStatus `json:"consumers"`       // empty when unreachable
}

// StreamStatus is one service's stream as the broker sees it: what it holds and its limits.
type StreamStatus struct {
	Name   string `json:"name"`   // Topology.StreamName
	Source string `json:"source"` // the service whose events it holds
	Exists bool   `json:"exists"` // false: not created yet
	// Messages and Bytes are what it holds now; FirstSeq and LastSeq the sequences it spans.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// The limits past which the broker discards (Discard: "old" drops the oldest messages,
	// "new" refuses new ones); -1 or 0 is no limit, as the broker reports it.
	MaxBytes   int64         `json:"max_bytes"`
	MaxMsgs    int64         `json:"max_msgs"`
	MaxMsgSize int32         `json:"max_msg_size"`
	MaxAge     time.Duration `json:"-"` // in JSON, max_age_seconds
	Discard    string        `json:"discard"`
}

// MarshalJSON gives the age limit in seconds.
func (s StreamStatus) MarshalJSON() ([]byte, error) {
	type plain StreamStatus
	return json.Marshal(struct {
		plain
		MaxAgeSeconds float64 `json:"max_age_seconds"`
	}{plain(s), s.MaxAge.Seconds()})
}

// ConsumerStatus is one durable consumer as the broker sees it.
type ConsumerStatus struct {
	Name   string `json:"name"`   // ConsumerGL, ConsumerWallet
	Stream string `json:"stream"` // the stream it reads
	// Side is "outbox" for the consumer of this service's events (the other service's), "inbox"
	// for this service's own, which feeds its inbox.
	Side   string `json:"side"`
	Exists bool   `json:"exists"` // false: the stream or the consumer is not created yet
	// Pending is the stream's messages not delivered to the consumer yet (num_pending);
	// Unacknowledged those delivered and not acknowledged (num_ack_pending); Redelivered those
	// delivered more than once and still not acknowledged.
	Pending        uint64 `json:"pending"`
	Unacknowledged int    `json:"unacknowledged"`
	Redelivered    int    `json:"redelivered"`
}

// ReadBroker asks the broker on nc for both streams (service's own first) and both durable
// consumers (the one reading service's events first), within timeout. A broker that does not
// answer is reported in the status (Reachable false, Error why), not as an error: the caller
// shows the rest of what it knows. url is shown as it is (redact it first).
func (t Topology) ReadBroker(ctx context.Context, nc *nats.Conn, service, url string, timeout time.Duration) BrokerStatus {
	b := BrokerStatus{URL: url, Streams: []StreamStatus{}, Consumers: []ConsumerStatus{}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Error = err.Error()
		return b
	}
	streams, err := t.readStreams(ctx, js, service)
	if err != nil {
		b.Error = Unreachable(nc, err, timeout)
		return b
	}
	consumers, err := t.readConsumers(ctx, js, service)
	if err != nil {
		b.Error = Unreachable(nc, err, timeout)
		return b
	}
	b.Reachable, b.Streams, b.Consumers = true, streams, consumers
	return b
}

// readStreams reads both streams, service's own first.
func (t Topology) readStreams(ctx context.Context, js jetstream.JetStream, service string) ([]StreamStatus, error) {
	sources := []string{contract.SourceWallet, contract.SourceGL}
	if service == contract.SourceGL {
		sources = []string{contract.SourceGL, contract.SourceWallet}
	}
	out := make([]StreamStatus, 0, len(sources))
	for _, source := range sources {
		ss := StreamStatus{Name: t.StreamName(source), Source: source}
		stream, err := js.Stream(ctx, ss.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return nil, err
		default:
			info := stream.CachedInfo()
			ss.Exists = true
			ss.Messages, ss.Bytes, ss.FirstSeq, ss.LastSeq = info.State.Msgs, info.State.Bytes, info.State.FirstSeq, info.State.LastSeq
			ss.MaxBytes, ss.MaxMsgs, ss.MaxMsgSize, ss.MaxAge = info.Config.MaxBytes, info.Config.MaxMsgs, info.Config.MaxMsgSize, info.Config.MaxAge
			ss.Discard = discardWord(info.Config.Discard)
		}
		out = append(out, ss)
	}
	return out, nil
}

// readConsumers reads both durable consumers, the one reading service's events first.
func (t Topology) readConsumers(ctx context.Context, js jetstream.JetStream, service string) ([]ConsumerStatus, error) {
	var out []ConsumerStatus
	for _, name := range []string{ConsumerGL, ConsumerWallet} {
		spec, err := t.Consumer(name)
		if err != nil {
			return nil, err
		}
		cs := ConsumerStatus{Name: name, Stream: t.StreamName(spec.Source), Side: "inbox"}
		if spec.Source == service {
			cs.Side = "outbox"
		}
		cons, err := js.Consumer(ctx, cs.Stream, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrConsumerNotFound):
		case err != nil:
			return nil, err
		default:
			info := cons.CachedInfo()
			cs.Exists, cs.Pending, cs.Unacknowledged, cs.Redelivered = true, info.NumPending, info.NumAckPending, info.NumRedelivered
		}
		if cs.Side == "outbox" {
			out = append([]ConsumerStatus{cs}, out...)
		} else {
			out = append(out, cs)
		}
	}
	return out, nil
}

// Line is the stream's figures and limits on one line, as status prints them.
func (s StreamStatus) Line() string {
	if !s.Exists {
		return "not created yet"
	}
	return fmt.Sprintf("%d messages, %s (seq %d–%d); max bytes %s, max msgs %s, max age %s, discard %s",
		s.Messages, FormatBytes(int64(s.Bytes)), s.FirstSeq, s.LastSeq, FormatByteLimit(s.MaxBytes), FormatCountLimit(s.MaxMsgs), FormatMaxAge(s.MaxAge), s.Discard)
}

// FormatByteLimit is a stream's byte limit as people read it; "no limit" for none.
func FormatByteLimit(n int64) string { return limitOf(n, FormatBytes) }

// FormatCountLimit is a stream's message limit; "no limit" for none.
func FormatCountLimit(n int64) string {
	return limitOf(n, func(n int64) string { return fmt.Sprint(n) })
}

// limitOf is a broker limit as words: "no limit" for the broker's -1 or 0.
func limitOf(n int64, format func(int64) string) string {
	if n <= 0 {
		return "no limit"
	}
	return format(n)
}

// FormatMaxAge is a stream's age limit as people read it: 7d, 36h, 1h30m0s; "no limit" for none.
func FormatMaxAge(d time.Duration) string {
	switch {
	case d <= 0:
		return "no limit"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// FormatBytes is a byte count as people read it: 512 B, 1.5 KiB, 1.0 GiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Line is the consumer's figures on one line, as status prints them.
func (c ConsumerStatus) Line() string {
	if !c.Exists {
		return "not created yet"
	}
	return fmt.Sprintf("%d pending, %d unacknowledged, %d redelivered", c.Pending, c.Unacknowledged, c.Redelivered)
}

// discardWord is a discard policy as the status shows it: old or new.
func discardWord(p jetstream.DiscardPolicy) string {
	if p == jetstream.DiscardNew {
		return "new"
	}
	return "old"
}

// Unreachable says why the broker did not answer: no connection (with the client's last error),
// or no answer within timeout.
func Unreachable(nc *nats.Conn, err error, timeout time.Duration) string {
	if status := nc.Status(); status != nats.CONNECTED {
		if last := nc.LastError(); last != nil {
			return fmt.Sprintf("not connected within %s (%s): %v", timeout, strings.ToLower(status.String()), last)
		}
		return fmt.Sprintf("not connected within %s (%s)", timeout, strings.ToLower(status.String()))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	return err.Error()
}
