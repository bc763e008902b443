// Command watermill is the Watermill peer of the bench's backlog phase (issue #16): it fills
// Watermill's SQL outbox table with N messages, as an application publishing through
// Watermill's SQL publisher and forwarder envelope would, then times Watermill's forwarder
// draining them into a JetStream stream. It prints one JSON line on stdout:
//
//	{"rows":N,"seconds":S,"events_per_second":R}
//
// and logs to stderr. It lives in a module of its own so that the product's dependencies do
// not grow by Watermill's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer-watermill: %v\n", err)
		os.Exit(1)
	}
}

// Defaults of the flags.
const (
	DefaultRows    = 100_000
	DefaultNATSURL = "nats://127.0.0.1:4222"
	DefaultStream  = "PEER_WATERMILL"
	// DefaultPayloadBytes is the size of the wallet's TransferCompleted.v1 envelope
	// (tools/internal/bench sampleTransferCompleted: 417 bytes).
	DefaultPayloadBytes = 417
	DefaultTimeout      = 10 * time.Minute
)

// Config is what one run does.
type Config struct {
	Rows         int
	DatabaseURL  string
	NATSURL      string
	Stream       string
	PayloadBytes int
	Timeout      time.Duration
	// BatchSize is the rows one query of the SQL subscriber reads (0: Watermill's default, 100).
	BatchSize int
	// Keep leaves the stream and the SQL tables in place (the test reads them).
	Keep bool
}

// Result is the line printed on stdout.
type Result struct {
	Rows            int     `json:"rows"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := zerolog.New(stderr).Level(zerolog.InfoLevel).With().Timestamp().Str("peer", "watermill").Logger()
	res, err := measure(ctx, cfg, log)
	if err != nil {
		return err
	}
	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Config{NATSURL: DefaultNATSURL}
	if u := getenv("NATS_URL"); u != "" {
		cfg.NATSURL = u
	}
	fs := flag.NewFlagSet("peer-watermill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Rows, "rows", DefaultRows, "messages in the backlog")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL database for Watermill's tables (required; the caller owns the database)")
	fs.StringVar(&cfg.NATSURL, "nats-url", cfg.NATSURL, "NATS server with JetStream (default $NATS_URL, else "+DefaultNATSURL+")")
	fs.StringVar(&cfg.Stream, "stream", DefaultStream, "JetStream stream created for the run and deleted at its end; must not exist")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", DefaultPayloadBytes, fmt.Sprintf("bytes of each message's payload (at least %d)", MinPayloadBytes))
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultTimeout, "longest the drain may take")
	fs.IntVar(&cfg.BatchSize, "batch-size", 0, "rows one query of Watermill's SQL subscriber reads (SubscribeBatchSize; 0: Watermill's default, 100)")
	fs.BoolVar(&cfg.Keep, "keep", false, "leave the stream and the SQL tables in place")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	var errs []error
	if c.Rows < 1 {
		errs = append(errs, errors.New("-rows must be at least 1"))
	}
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("-database-url is required"))
	}
	if c.Stream == "" || strings.ContainsAny(c.Stream, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("-stream %q: a stream name needs at least one character and no whitespace, '.', '*', '>', '/' or '\\'", c.Stream))
	}
	if c.PayloadBytes < MinPayloadBytes {
		errs = append(errs, fmt.Errorf("-payload-bytes must be at least %d (the envelope without padding)", MinPayloadBytes))
	}
	if c.BatchSize < 0 {
		errs = append(errs, errors.New("-batch-size must not be negative"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	return errors.Join(errs...)
}

func round(v float64, places int) float64 {
	p := math.Pow10(places)
	return math.Round(v*p) / p
}
