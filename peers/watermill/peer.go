package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// FillTxRows is how many messages one transaction of the (untimed) fill writes, as the
// bench's backlog phase writes our outbox (outbox.Outbox.Add, transactions of 1000 rows).
const FillTxRows = 1000

// pollEvery is how often the drain looks at the stream's message count: the bench polls our
// outbox's pending rows as often.
const pollEvery = 100 * time.Millisecond

// Watermill's PostgreSQL schema and offsets adapters, with their defaults (100 rows a query
// unless -batch-size says otherwise, JSON payload column): the pair Watermill's SQL
// documentation names for PostgreSQL.
var (
	schema  = wmsql.DefaultPostgreSQLSchema{}
	offsets = wmsql.DefaultPostgreSQLOffsetsAdapter{}
)

// names are the run's resources, all derived from the stream name so that runs with other
// streams can share a database and a server.
type names struct {
	stream  string
	subject string // where the forwarder publishes: the stream's only subject
	topic   string // Watermill's forwarder topic: the SQL tables' name
}

func namesFor(stream string) names {
	topic := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, strings.ToLower(stream))
	// PostgreSQL cuts identifiers at 63 bytes; "watermill_offsets_forward_" takes 26.
	if len(topic) > 28 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(stream))
		topic = fmt.Sprintf("%s_%08x", topic[:19], h.Sum32())
	}
	return names{stream: stream, subject: "peers.watermill." + stream + ".TransferCompleted.v1", topic: "forward_" + topic}
}

// measure fills the backlog, times the forwarder draining it and cleans up.
func measure(ctx context.Context, cfg Config, log zerolog.Logger) (Result, error) {
	n := namesFor(cfg.Stream)
	wlog := watermillLogger{log.With().Str("component", "watermill").Logger()}

	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return Result{}, fmt.Errorf("open database: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return Result{}, fmt.Errorf("connect database: %w", err)
	}
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("peer-watermill-admin"))
	if err != nil {
		return Result{}, fmt.Errorf("connect nats %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Result{}, fmt.Errorf("jetstream: %w", err)
	}

	stream, err := createStream(ctx, js, n)
	if err != nil {
		return Result{}, err
	}
	if !cfg.Keep {
		defer func() {
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			if err := js.DeleteStream(cctx, n.stream); err != nil {
				log.Error().Err(err).Str("stream", n.stream).Msg("delete stream")
			}
		}()
	}

	if err := createTables(ctx, pool, n, wlog, log); err != nil {
		return Result{}, err
	}
	if !cfg.Keep {
		defer func() {
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			if err := dropTables(cctx, pool, n); err != nil {
				log.Error().Err(err).Msg("drop tables")
			}
		}()
	}

	fillStart := time.Now()
	if err := fill(ctx, pool, n, cfg.Rows, cfg.PayloadBytes, wlog); err != nil {
		return Result{}, err
	}
	log.Info().Int("rows", cfg.Rows).Float64("seconds", round(time.Since(fillStart).Seconds(), 2)).Str("table", schema.MessagesTable(n.topic)).Msg("backlog written")

	elapsed, err := drain(ctx, pool, cfg, n, stream, wlog, log)
	if err != nil {
		return Result{}, err
	}
	secs := elapsed.Seconds()
	res := Result{Rows: cfg.Rows, Seconds: round(secs, 3), EventsPerSecond: round(float64(cfg.Rows)/secs, 1)}
	log.Info().Int("rows", res.Rows).Float64("seconds", res.Seconds).Float64("events_per_second", res.EventsPerSecond).Msg("drained")
	return res, nil
}

// cleanupContext outlives an interrupted run, so that Ctrl-C still removes what it made.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// createStream makes the run's stream as our topology makes the wallet's (file storage,
// limits retention, the default two-minute duplicate window), refusing one that exists: it
// may be someone else's, and its messages would be counted.
func createStream(ctx context.Context, js jetstream.JetStream, n names) (jetstream.Stream, error) {
	if _, err := js.Stream(ctx, n.stream); err == nil {
		return nil, fmt.Errorf("stream %s exists: delete it or choose another -stream", n.stream)
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", n.stream, err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        n.stream,
		Description: "walletgl peers/watermill: a backlog drained by Watermill's forwarder; deleted after the run",
		Subjects:    []string{n.subject},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    1,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", n.stream, err)
	}
	return stream, nil
}

// createTables creates Watermill's messages and offsets tables through the subscriber's own
// schema initialisation, after dropping what a crashed run with the same stream name left.
func createTables(ctx context.Context, pool *pgxpool.Pool, n names, wlog watermill.LoggerAdapter, log zerolog.Logger) error {
	if err := dropTables(ctx, pool, n); err != nil {
		return err
	}
	sub, err := newSubscriber(pool, 0, wlog)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(n.topic); err != nil {
		return fmt.Errorf("create watermill tables: %w", err)
	}
	log.Info().Str("messages", schema.MessagesTable(n.topic)).Str("offsets", offsets.MessagesOffsetsTable(n.topic)).Msg("watermill tables created")
	return nil
}

func dropTables(ctx context.Context, pool *pgxpool.Pool, n names) error {
	_, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+schema.MessagesTable(n.topic)+", "+offsets.MessagesOffsetsTable(n.topic))
	if err != nil {
		return fmt.Errorf("drop watermill tables: %w", err)
	}
	return nil
}

// newSubscriber is the SQL subscriber as Watermill's documentation configures it for
// PostgreSQL, with the subscriber's defaults (1 s poll interval when a query finds nothing, 30 s
// ack deadline, the default consumer group); InitializeSchema as in its forwarder example (the
// tables exist by then: it costs one CREATE TABLE IF NOT EXISTS at start). batchSize is the
// schema's SubscribeBatchSize (0: Watermill's default, 100).
func newSubscriber(pool *pgxpool.Pool, batchSize int, wlog watermill.LoggerAdapter) (*wmsql.Subscriber, error) {
	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromPgx(pool), wmsql.SubscriberConfig{
		SchemaAdapter:    wmsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batchSize},
		OffsetsAdapter:   offsets,
		InitializeSchema: true,
	}, wlog)
	if err != nil {
		return nil, fmt.Errorf("sql subscriber: %w", err)
	}
	return sub, nil
}

// fill writes rows messages for the stream's subject into the forwarder's SQL table, in
// transactions of FillTxRows, through Watermill's SQL publisher on the transaction decorated by
// the forwarder's publisher: how an application writes its outbox with Watermill.
func fill(ctx context.Context, pool *pgxpool.Pool, n names, rows, payloadBytes int, wlog watermill.LoggerAdapter) error {
	at := time.Now().UTC()
	for done := 0; done < rows; {
		size := min(FillTxRows, rows-done)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			sqlPub, err := wmsql.NewPublisher(wmsql.TxFromPgx(tx), wmsql.PublisherConfig{SchemaAdapter: schema}, wlog)
			if err != nil {
				return fmt.Errorf("sql publisher: %w", err)
			}
			pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: n.topic})
			msgs := make([]*message.Message, size)
			for i := range msgs {
				id := watermill.NewUUID()
				msgs[i] = message.NewMessage(id, envelope(id, at, payloadBytes))
				msgs[i].SetContext(ctx)
			}
			return pub.Publish(n.subject, msgs...)
		})
		if err != nil {
			return fmt.Errorf("write backlog (%d of %d written): %w", done, rows, err)
		}
		done += size
	}
	return nil
}

// drain runs Watermill's forwarder from the SQL table to JetStream until the stream holds every
// row, and returns the time from the forwarder's start.
func drain(ctx context.Context, pool *pgxpool.Pool, cfg Config, n names, stream jetstream.Stream, wlog watermill.LoggerAdapter, log zerolog.Logger) (time.Duration, error) {
	sub, err := newSubscriber(pool, cfg.BatchSize, wlog)
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	pub, err := newPublisher(cfg.NATSURL, wlog)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	fwd, err := forwarder.NewForwarder(sub, pub, wlog, forwarder.Config{ForwarderTopic: n.topic})
	if err != nil {
		return 0, fmt.Errorf("forwarder: %w", err)
	}

	log.Info().Str("topic", n.topic).Str("subject", n.subject).Int("batch_size", cmp.Or(cfg.BatchSize, 100)).Msg("starting the forwarder")
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- fwd.Run(runCtx) }()
	// The forwarder is stopped, and waited for, on every way out.
	defer func() {
		if err := fwd.Close(); err != nil {
			log.Error().Err(err).Msg("close forwarder")
		}
		cancel()
		<-stopped
	}()

	deadline := time.NewTimer(cfg.Timeout)
	defer deadline.Stop()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	lastLog := start
	var held uint64
	for held < uint64(cfg.Rows) {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("drain interrupted with %d of %d messages in the stream: %w", held, cfg.Rows, ctx.Err())
		case <-deadline.C:
			return 0, fmt.Errorf("drain did not finish within -timeout %s: %d of %d messages in stream %s", cfg.Timeout, held, cfg.Rows, n.stream)
		case err := <-stopped:
			stopped <- err // for the deferred wait
			return 0, fmt.Errorf("forwarder stopped with %d of %d messages in the stream: %v", held, cfg.Rows, err)
		case <-poll.C:
		}
		info, err := stream.Info(ctx)
		if err != nil {
			log.Warn().Err(err).Msg("stream info") // a missed poll only delays the stop
			continue
		}
		held = info.State.Msgs
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			secs := time.Since(start).Seconds()
			log.Info().Uint64("in_stream", held).Int("rows", cfg.Rows).Float64("seconds", round(secs, 1)).
				Float64("events_per_second", round(float64(held)/secs, 1)).Msg("draining")
		}
	}
	elapsed := time.Since(start)

	// More than rows would be a message published twice outside the broker's duplicate window.
	if err := fwd.Close(); err != nil {
		log.Error().Err(err).Msg("close forwarder")
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	if info.State.Msgs != uint64(cfg.Rows) {
		return 0, fmt.Errorf("stream %s holds %d messages after the drain, want %d", n.stream, info.State.Msgs, cfg.Rows)
	}
	return elapsed, nil
}

// newPublisher is watermill-nats's JetStream publisher as its documentation configures it for
// exactly-once delivery: TrackMsgId (Nats-Msg-Id = the message's UUID, so the broker drops a
// re-publish within its duplicate window) and synchronous publishing, one PubAck awaited per
// message, the work our relay does per event. The stream is ours, not auto-provisioned.
func newPublisher(url string, wlog watermill.LoggerAdapter) (*wmnats.Publisher, error) {
	pub, err := wmnats.NewPublisher(wmnats.PublisherConfig{
		URL:         url,
		NatsOptions: []nats.Option{nats.Name("peer-watermill-forwarder")},
		JetStream:   wmnats.JetStreamConfig{TrackMsgId: true},
	}, wlog)
	if err != nil {
		return nil, fmt.Errorf("jetstream publisher: %w", err)
	}
	return pub, nil
}
