package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"walletgl/internal/config"
)

// Broker is where the broker is and how a service reaches it: NATS_URL, and the credentials
// and TLS of Credentials.
type Broker struct {
	URL string
	Credentials
}

// Bind declares the broker's settings, with their defaults.
func (b *Broker) Bind(s *config.Set) {
	s.String(&b.URL, "NATS_URL", "nats-url", "nats://127.0.0.1:4222", "NATS server URL; several comma-separated URLs for a cluster")
	s.String(&b.CredsFile, "NATS_CREDS", "nats-creds", "", "a .creds file (user JWT and NKey seed) to authenticate to NATS with")
	s.String(&b.NKeySeedFile, "NATS_NKEY_SEED_FILE", "nats-nkey-seed-file", "", "a file holding the NKey seed (SU…) to authenticate to NATS with")
	s.String(&b.User, "NATS_USER", "nats-user", "", "the NATS user to authenticate as (with NATS_PASSWORD)")
	s.Secret(&b.Password, "NATS_PASSWORD", "the NATS user's password")
	s.Secret(&b.Token, "NATS_TOKEN", "a token to authenticate to NATS with")
	s.String(&b.TLSCA, "NATS_TLS_CA", "nats-tls-ca", "", "PEM file of the CA that signs the NATS servers' certificates (TLS to the broker)")
	s.String(&b.TLSCert, "NATS_TLS_CERT", "nats-tls-cert", "", "PEM client certificate for mutual TLS to the broker (with NATS_TLS_KEY)")
	s.String(&b.TLSKey, "NATS_TLS_KEY", "nats-tls-key", "", "PEM private key of NATS_TLS_CERT")
}

// Validate reports settings that are missing or do not go together.
func (b Broker) Validate() error {
	var errs []error
	if b.URL == "" {
		errs = append(errs, errors.New("NATS_URL is empty"))
	}
	return errors.Join(append(errs, b.Credentials.Validate())...)
}

// Connect connects to the broker with b's URL, credentials and TLS (see Connect), as the
// connection called name, taking replies on ReplyPrefix(user): a service's own user
// (contract.SourceWallet, contract.SourceGL) for serve, OperatorUser for the operator commands.
func (b Broker) Connect(ctx context.Context, name, user string, log zerolog.Logger) (*nats.Conn, error) {
	opts, err := b.Options()
	if err != nil {
		return nil, err
	}
	return Connect(ctx, b.URL, name, log, append(opts, nats.CustomInboxPrefix(ReplyPrefix(user)))...)
}

// Bind declares the topology's settings: the streams' limits and the durable consumers'
// delivery, with their defaults.
func (t *Topology) Bind(s *config.Set) {
	s.String(&t.Namespace, "EVENTS_NAMESPACE", "events-namespace", "", "prefix of stream names and subjects, to run several deployments on one NATS")
	s.Duration(&t.DuplicateWindow, "EVENTS_DUPLICATE_WINDOW", "duplicate-window", DefaultDuplicateWindow, "how long the broker drops a re-published Nats-Msg-Id")
	s.Int(&t.Replicas, "EVENTS_STREAM_REPLICAS", "stream-replicas", 1, "replicas of each stream (3 on a three-node cluster)")
	s.Duration(&t.MaxAge, "EVENTS_STREAM_MAX_AGE", "stream-max-age", DefaultStreamMaxAge, "events older than this leave each stream, read or not (gl replay reaches back at most this far); one that leaves unread is published again from the outbox")
	s.Int64(&t.MaxBytes, "EVENTS_STREAM_MAX_BYTES", "stream-max-bytes", DefaultStreamMaxBytes, "size limit of each stream in bytes: a full stream drops its oldest events, and the relay holds events back in the outbox while those the consumer has not read fill half of it")
	s.Int(&t.MaxDeliver, "EVENTS_MAX_DELIVER", "max-deliver", DefaultMaxDeliver, "deliveries whose handler ran and failed before the inbox records the event failed (exhausted); a database that is down never counts")
	s.Duration(&t.AckWait, "EVENTS_ACK_WAIT", "ack-wait", DefaultAckWait, "how long the broker waits for a consumer's ack before redelivering")
}

// Validate reports every topology setting out of range.
func (t Topology) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"EVENTS_DUPLICATE_WINDOW": t.DuplicateWindow, "EVENTS_STREAM_MAX_AGE": t.MaxAge, "EVENTS_ACK_WAIT": t.AckWait,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	for name, n := range map[string]int{"EVENTS_MAX_DELIVER": t.MaxDeliver, "EVENTS_STREAM_REPLICAS": t.Replicas} {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, n))
		}
	}
	if t.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("EVENTS_STREAM_MAX_BYTES must be positive, got %d", t.MaxBytes))
	}
	if t.MaxAge > 0 && t.MaxAge < t.DuplicateWindow {
		errs = append(errs, fmt.Errorf("EVENTS_STREAM_MAX_AGE (%s) must not be shorter than EVENTS_DUPLICATE_WINDOW (%s)", t.MaxAge, t.DuplicateWindow))
	}
	return errors.Join(errs...)
}

// WithLog is t with log hearing of the stream limits kept because an operator raised them.
func (t Topology) WithLog(log zerolog.Logger) Topology {
	t.Log = log
	return t
}
