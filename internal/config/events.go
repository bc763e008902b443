package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"walletgl/internal/events"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/events/signing"
	"walletgl/internal/faults"
)

// Events holds the settings of the outbox, relay, inbox and consumer, shared by both services.
type Events struct {
	NATSURL         string
	NATS            events.Credentials
	Namespace       string
	DuplicateWindow time.Duration
	Replicas        int
	StreamMaxAge    time.Duration
	StreamMaxBytes  int64
	PollInterval    time.Duration
	CatchUpLimit    int
	AckTimeout      time.Duration
	PublishTimeout  time.Duration
	MaxAttempts     int
	Lease           time.Duration
	Retention       time.Duration
	InboxRetention  time.Duration
	BatchSize       int
	RelayWorkers    int
	ConsumerWorkers int
	PublishOnCommit bool
	MarkDelay       time.Duration
	MaxDeliver      int
	AckWait         time.Duration
	Faults          string
	FaultsSeed      int
	// Signed events: this service's private key, the public keys of the producers whose
	// events it accepts, and the escape hatch for running without them.
	SigningKeyFile   string
	TrustedKeys      string
	InsecureUnsigned bool
}

// BindEvents binds the shared event settings with their defaults (the seed's where it names one).
func BindEvents(s *Set, c *Events) {
	s.String(&c.NATSURL, "NATS_URL", "nats-url", "nats://127.0.0.1:4222", "NATS server URL; several comma-separated URLs for a cluster")
	s.String(&c.NATS.CredsFile, "NATS_CREDS", "nats-creds", "", "a .creds file (user JWT and NKey seed) to authenticate to NATS with")
	s.String(&c.NATS.NKeySeedFile, "NATS_NKEY_SEED_FILE", "nats-nkey-seed-file", "", "a file holding the NKey seed (SU…) to authenticate to NATS with")
	s.String(&c.NATS.User, "NATS_USER", "nats-user", "", "the NATS user to authenticate as (with NATS_PASSWORD)")
	s.Secret(&c.NATS.Password, "NATS_PASSWORD", "the NATS user's password")
	s.Secret(&c.NATS.Token, "NATS_TOKEN", "a token to authenticate to NATS with")
	s.String(&c.NATS.TLSCA, "NATS_TLS_CA", "nats-tls-ca", "", "PEM file of the CA that signs the NATS servers' certificates (TLS to the broker)")
	s.String(&c.NATS.TLSCert, "NATS_TLS_CERT", "nats-tls-cert", "", "PEM client certificate for mutual TLS to the broker (with NATS_TLS_KEY)")
	s.String(&c.NATS.TLSKey, "NATS_TLS_KEY", "nats-tls-key", "", "PEM private key of NATS_TLS_CERT")
	s.String(&c.Namespace, "EVENTS_NAMESPACE", "events-namespace", "", "prefix of stream names and subjects, to run several deployments on one NATS")
	s.Duration(&c.DuplicateWindow, "EVENTS_DUPLICATE_WINDOW", "duplicate-window", events.DefaultDuplicateWindow, "how long the broker drops a re-published Nats-Msg-Id")
	s.Int(&c.Replicas, "EVENTS_STREAM_REPLICAS", "stream-replicas", 1, "replicas of each stream (3 on a three-node cluster)")
	s.Duration(&c.StreamMaxAge, "EVENTS_STREAM_MAX_AGE", "stream-max-age", events.DefaultStreamMaxAge, "events older than this leave each stream, read or not (gl replay reaches back at most this far); one that leaves unread is published again from the outbox")
	s.Int64(&c.StreamMaxBytes, "EVENTS_STREAM_MAX_BYTES", "stream-max-bytes", events.DefaultStreamMaxBytes, "size limit of each stream in bytes: a full stream drops its oldest events, and the relay holds events back in the outbox while those the consumer has not read fill half of it")
	s.Duration(&c.PollInterval, "EVENTS_POLL_INTERVAL", "poll-interval", outbox.DefaultPollInterval, "relay fallback poll and catch-up interval (LISTEN/NOTIFY wakes it sooner)")
	s.Int(&c.CatchUpLimit, "EVENTS_CATCH_UP_LIMIT", "catch-up-limit", outbox.DefaultCatchUpLimit, "unacknowledged rows a catch-up round checks (and publishes again when the stream no longer holds their message)")
	s.Duration(&c.AckTimeout, "EVENTS_ACK_TIMEOUT", "ack-timeout", outbox.DefaultAckTimeout, "how often a dispatched row not yet acknowledged is checked: published again when the stream no longer holds its message, left for its consumer otherwise")
	s.Duration(&c.PublishTimeout, "EVENTS_PUBLISH_TIMEOUT", "publish-timeout", outbox.DefaultPublishTimeout, "how long the relay waits for the broker's PubAck of each message before it gives the row back")
	s.Int(&c.MaxAttempts, "EVENTS_MAX_ATTEMPTS", "max-attempts", outbox.DefaultMaxAttempts, "failed publishes before an outbox row becomes dead_letter")
	s.Duration(&c.Lease, "EVENTS_LEASE", "lease", outbox.DefaultLease, "how long a relay holds claimed rows before another relay may take them")
	s.Duration(&c.Retention, "EVENTS_RETENTION", "retention", outbox.DefaultRetention, "acknowledged outbox rows older than this are deleted")
	s.Duration(&c.InboxRetention, "EVENTS_INBOX_RETENTION", "inbox-retention", inbox.DefaultRetention, "inbox rows of processed events not seen for this long are deleted; at least EVENTS_STREAM_MAX_AGE + EVENTS_DUPLICATE_WINDOW and EVENTS_RETENTION, so that a late duplicate is still recognised")
	s.Int(&c.BatchSize, "EVENTS_BATCH_SIZE", "batch-size", outbox.DefaultBatchSize, "rows a relay claims, and events a consumer fetches and commits, per round")
	s.Int(&c.RelayWorkers, "EVENTS_RELAY_WORKERS", "relay-workers", outbox.DefaultRelayWorkers, "publish rounds a relay keeps in flight at once (claims and hand-offs each)")
	s.Int(&c.ConsumerWorkers, "EVENTS_CONSUMER_WORKERS", "consumer-workers", inbox.DefaultConsumerWorkers, "fetch-and-commit loops a consumer runs on its durable consumer; all but the first work only while a backlog waits")
	s.Bool(&c.PublishOnCommit, "EVENTS_PUBLISH_ON_COMMIT", "publish-on-commit", true, "write outbox rows claimed by this process's relay and publish them right after commit (false: every row waits for a NOTIFY and a claim)")
	s.Duration(&c.MarkDelay, "EVENTS_MARK_DELAY", "mark-delay", outbox.DefaultMarkDelay, "how long the wallet's relay leaves a row it published on commit dispatching, for the GL's acknowledgment to record the publish in the same update (0: mark it dispatched at once; at most half EVENTS_LEASE and EVENTS_ACK_TIMEOUT)")
	s.Int(&c.MaxDeliver, "EVENTS_MAX_DELIVER", "max-deliver", events.DefaultMaxDeliver, "deliveries whose handler ran and failed before the inbox records the event failed (exhausted); a database that is down never counts")
	s.Duration(&c.AckWait, "EVENTS_ACK_WAIT", "ack-wait", events.DefaultAckWait, "how long the broker waits for a consumer's ack before redelivering")
	s.String(&c.Faults, "FAULTS", "faults", "", "arms fault points for game days and the fault harness, e.g. gl.consumer.after_commit:crash@0.05 (empty: none)")
	s.Int(&c.FaultsSeed, "FAULTS_SEED", "faults-seed", 1, "seed of the fault points' draws, for repeatable runs")
	s.String(&c.SigningKeyFile, "EVENTS_SIGNING_KEY_FILE", "signing-key-file", "", "this service's private event signing key, DIR/<service>.key of `<service> events keygen DIR`: every event it publishes is signed with it (required by serve)")
	s.String(&c.TrustedKeys, "EVENTS_TRUSTED_KEYS", "trusted-keys", "", "comma-separated public key files (DIR/<service>.pub) of the producers whose events this service accepts: the other service's, two of it while its key is rotated (required by serve and gl replay)")
	s.Bool(&c.InsecureUnsigned, "EVENTS_INSECURE_UNSIGNED", "insecure-unsigned", false, "run without EVENTS_SIGNING_KEY_FILE / EVENTS_TRUSTED_KEYS: events go out unsigned, and without trusted keys anyone who can publish on the broker can make this service apply an event (never in production; warned at every start)")
}

// EventKeyEnv is the environment that gives service the key pairs `events keygen dir` wrote:
// its own private key, and the public keys of the producers it trusts.
func EventKeyEnv(dir, service string, trusted ...string) []string {
	private, _ := signing.KeyFiles(dir, service)
	pubs := make([]string, len(trusted))
	for i, producer := range trusted {
		_, pubs[i] = signing.KeyFiles(dir, producer)
	}
	return []string{"EVENTS_SIGNING_KEY_FILE=" + private, "EVENTS_TRUSTED_KEYS=" + strings.Join(pubs, ",")}
}

// EventKeys are a service's event keys as its settings name them.
type EventKeys struct {
	// Signer signs the events the service publishes; nil: they go out unsigned
	// (EVENTS_INSECURE_UNSIGNED without EVENTS_SIGNING_KEY_FILE).
	Signer *signing.Key
	// Trust verifies the events it consumes (signing.AcceptUnsigned with EVENTS_INSECURE_UNSIGNED
	// and no EVENTS_TRUSTED_KEYS).
	Trust *signing.Trust
}

// EventKeys reads the keys of service, which consumes the events of producer; sign=false reads
// only the trusted keys (a replay publishes nothing). Both are required unless
// EVENTS_INSECURE_UNSIGNED=true, which log hears of at every call: a missing signing key means
// unsigned events, missing trusted keys mean events accepted unverified. Keys given are used
// either way.
func (c Events) EventKeys(service, producer string, sign bool, log zerolog.Logger) (EventKeys, error) {
	var k EventKeys
	var errs, insecure []string
	const keygen = "make them with `%s events keygen DIR`, or set EVENTS_INSECURE_UNSIGNED=true to run without (never in production)"
	switch {
	case !sign:
	case c.SigningKeyFile != "":
		key, err := signing.ReadKey(c.SigningKeyFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("EVENTS_SIGNING_KEY_FILE: %v", err))
		case key.Service() != service:
			errs = append(errs, fmt.Sprintf("EVENTS_SIGNING_KEY_FILE %s is %s's key, not %s's", c.SigningKeyFile, key.Service(), service))
		default:
			k.Signer = key
		}
	case c.InsecureUnsigned:
		insecure = append(insecure, "events are published unsigned: consumers that verify refuse them")
	default:
		errs = append(errs, "EVENTS_SIGNING_KEY_FILE is not set: "+fmt.Sprintf(keygen, service))
	}
	switch {
	case c.TrustedKeys != "":
		var keys []signing.PublicKey
		for path := range strings.SplitSeq(c.TrustedKeys, ",") {
			if path = strings.TrimSpace(path); path == "" {
				continue
			}
			key, err := signing.ReadPublicKey(path)
			if err != nil {
				errs = append(errs, fmt.Sprintf("EVENTS_TRUSTED_KEYS: %v", err))
				continue
			}
			keys = append(keys, key)
		}
		trust, err := signing.NewTrust(keys...)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("EVENTS_TRUSTED_KEYS: %v", err))
		case !trust.Has(producer):
			errs = append(errs, fmt.Sprintf("EVENTS_TRUSTED_KEYS holds no key of %s, whose events %s consumes: add %s.pub of `%s events keygen`", producer, service, producer, producer))
		default:
			k.Trust = trust
		}
	case c.InsecureUnsigned:
		k.Trust = signing.AcceptUnsigned()
		insecure = append(insecure, fmt.Sprintf("events are accepted unverified: anyone who can publish on %s's subjects can make %s apply an event", producer, service))
	default:
		errs = append(errs, "EVENTS_TRUSTED_KEYS is not set: "+fmt.Sprintf(keygen, producer))
	}
	if len(errs) > 0 {
		return EventKeys{}, fmt.Errorf("configuration: signed events: %s", strings.Join(errs, "; "))
	}
	for _, msg := range insecure {
		log.Warn().Bool("events_insecure_unsigned", true).Msg("EVENTS_INSECURE_UNSIGNED: " + msg)
	}
	return k, nil
}

// Connect connects to the broker with these settings' URL, credentials and TLS.
func (c Events) Connect(ctx context.Context, name string, log zerolog.Logger) (*nats.Conn, error) {
	opts, err := c.NATS.Options()
	if err != nil {
		return nil, err
	}
	return events.Connect(ctx, c.NATSURL, name, log, opts...)
}

// FaultSet parses FAULTS; nil when no fault point is armed.
func (c Events) FaultSet() (*faults.Set, error) {
	return faults.Parse(c.Faults, uint64(c.FaultsSeed))
}

// Validate reports every setting out of range.
func (c Events) Validate() error {
	var errs []error
	positive := map[string]time.Duration{
		"EVENTS_POLL_INTERVAL": c.PollInterval, "EVENTS_ACK_TIMEOUT": c.AckTimeout, "EVENTS_LEASE": c.Lease,
		"EVENTS_RETENTION": c.Retention, "EVENTS_DUPLICATE_WINDOW": c.DuplicateWindow, "EVENTS_ACK_WAIT": c.AckWait,
		"EVENTS_PUBLISH_TIMEOUT": c.PublishTimeout, "EVENTS_STREAM_MAX_AGE": c.StreamMaxAge,
		"EVENTS_INBOX_RETENTION": c.InboxRetention,
	}
	for name, d := range positive {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	counts := map[string]int{
		"EVENTS_CATCH_UP_LIMIT": c.CatchUpLimit, "EVENTS_MAX_ATTEMPTS": c.MaxAttempts,
		"EVENTS_BATCH_SIZE": c.BatchSize, "EVENTS_RELAY_WORKERS": c.RelayWorkers, "EVENTS_CONSUMER_WORKERS": c.ConsumerWorkers, "EVENTS_MAX_DELIVER": c.MaxDeliver, "EVENTS_STREAM_REPLICAS": c.Replicas,
	}
	for name, n := range counts {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, n))
		}
	}
	if limit := min(c.Lease, c.AckTimeout) / 2; c.MarkDelay < 0 || c.MarkDelay > limit {
		errs = append(errs, fmt.Errorf("EVENTS_MARK_DELAY must be between 0 and half of EVENTS_LEASE and EVENTS_ACK_TIMEOUT (%s), got %s", limit, c.MarkDelay))
	}
	if c.StreamMaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("EVENTS_STREAM_MAX_BYTES must be positive, got %d", c.StreamMaxBytes))
	}
	if c.StreamMaxAge > 0 && c.StreamMaxAge < c.DuplicateWindow {
		errs = append(errs, fmt.Errorf("EVENTS_STREAM_MAX_AGE (%s) must not be shorter than EVENTS_DUPLICATE_WINDOW (%s)", c.StreamMaxAge, c.DuplicateWindow))
	}
	if err := c.validateInboxRetention(); err != nil {
		errs = append(errs, err)
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.NATSURL == "" {
		errs = append(errs, errors.New("NATS_URL is empty"))
	}
	return errors.Join(errs...)
}

// validateInboxRetention refuses an inbox retention shorter than inbox.MinRetention: the
// inbox would forget an event that can still come again. The other service's stream and outbox
// count too, so both services take the same settings.
func (c Events) validateInboxRetention() error {
	floor, _ := inbox.MinRetention(c.StreamMaxAge, c.DuplicateWindow, c.Retention)
	if c.InboxRetention <= 0 || c.InboxRetention >= floor {
		return nil
	}
	return fmt.Errorf("EVENTS_INBOX_RETENTION (%s) must be at least %s, the longer of EVENTS_STREAM_MAX_AGE + EVENTS_DUPLICATE_WINDOW (%s + %s) "+
		"and EVENTS_RETENTION (%s): a message is delivered again as long as the stream holds it, and wallet outbox republish sends "+
		"the outbox's acknowledged rows again; an inbox that forgot the event would not recognise the duplicate",
		c.InboxRetention, floor, c.StreamMaxAge, c.DuplicateWindow, c.Retention)
}

// Topology is the JetStream layout these settings describe; log hears of kept stream limits.
func (c Events) Topology(log zerolog.Logger) events.Topology {
	return events.Topology{
		Namespace: c.Namespace, DuplicateWindow: c.DuplicateWindow, Replicas: c.Replicas,
		MaxAge: c.StreamMaxAge, MaxBytes: c.StreamMaxBytes, AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, Log: log,
	}
}

// Relay is the relay configuration for source's outbox, signing with signer.
func (c Events) Relay(source, ackConsumer string, f *faults.Set, signer *signing.Key) outbox.RelayConfig {
	return outbox.RelayConfig{
		Faults: f, Signer: signer,
		Source: source, BatchSize: c.BatchSize, Workers: c.RelayWorkers, CatchUpLimit: c.CatchUpLimit, PollInterval: c.PollInterval,
		AckTimeout: c.AckTimeout, PublishTimeout: c.PublishTimeout, MaxAttempts: c.MaxAttempts, Lease: c.Lease, Retention: c.Retention,
		AckConsumer: ackConsumer, MarkDelay: c.MarkDelay,
	}
}

// Consumer is the configuration of the durable consumer called name (events.ConsumerGL or
// events.ConsumerWallet), as the topology declares it, verifying events with trust.
func (c Events) Consumer(name string, f *faults.Set, trust *signing.Trust) (inbox.ConsumerConfig, error) {
	spec, err := c.Topology(zerolog.Nop()).Consumer(name)
	if err != nil {
		return inbox.ConsumerConfig{}, err
	}
	return inbox.ConsumerConfig{ConsumerSpec: spec, BatchSize: c.BatchSize, Workers: c.ConsumerWorkers, Faults: f, Trust: trust,
		InboxRetention: c.InboxRetention}, nil
}
