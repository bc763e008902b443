package soak

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"walletgl/internal/events"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
)

// Scaled are the limits the soak gives both services, each far below production's so that an
// hour turns every stream, table and window over many times.
type Scaled struct {
	StreamMaxBytes      int64         // EVENTS_STREAM_MAX_BYTES
	StreamMaxAge        time.Duration // EVENTS_STREAM_MAX_AGE
	DuplicateWindow     time.Duration // EVENTS_DUPLICATE_WINDOW
	Retention           time.Duration // EVENTS_RETENTION: acknowledged outbox rows
	InboxRetention      time.Duration // EVENTS_INBOX_RETENTION: processed inbox rows
	CheckpointInterval  time.Duration // GL_CHECKPOINT_INTERVAL
	CheckpointLines     int64         // GL_CHECKPOINT_LINES
	CheckpointRetention time.Duration // GL_CHECKPOINT_RETENTION
}

// DefaultScaled are `make soak`'s limits.
func DefaultScaled() Scaled {
	return Scaled{
		StreamMaxBytes: 1 << 20, StreamMaxAge: 2 * time.Minute, DuplicateWindow: 20 * time.Second,
		Retention: time.Minute, InboxRetention: 150 * time.Second,
		CheckpointInterval: time.Second, CheckpointLines: 500, CheckpointRetention: time.Minute,
	}
}

// Validate rejects limits the services would refuse, or that would not bound anything.
func (s Scaled) Validate() error {
	switch {
	case s.StreamMaxBytes <= 0:
		return fmt.Errorf("stream max bytes must be positive, got %d", s.StreamMaxBytes)
	case s.StreamMaxAge < s.DuplicateWindow:
		return fmt.Errorf("stream max age %s must not be shorter than the duplicate window %s", s.StreamMaxAge, s.DuplicateWindow)
	case s.InboxRetention < s.StreamMaxAge+s.DuplicateWindow || s.InboxRetention < s.Retention:
		return fmt.Errorf("inbox retention %s must be at least the stream max age plus the duplicate window (%s) and the outbox retention (%s)",
			s.InboxRetention, s.StreamMaxAge+s.DuplicateWindow, s.Retention)
	case s.Retention <= 0 || s.CheckpointInterval < time.Second || s.CheckpointLines < 1 || s.CheckpointRetention <= 0:
		return fmt.Errorf("retention, checkpoint interval (1s at least), lines and retention must be positive")
	}
	return nil
}

// Env is the services' environment for the limits: the wallet's and the GL's. A setting a
// service does not know is ignored by it (settings are read by name).
func (s Scaled) Env() (wallet, gl []string) {
	common := []string{
		"EVENTS_STREAM_MAX_BYTES=" + strconv.FormatInt(s.StreamMaxBytes, 10),
		"EVENTS_STREAM_MAX_AGE=" + s.StreamMaxAge.String(),
		"EVENTS_DUPLICATE_WINDOW=" + s.DuplicateWindow.String(),
		"EVENTS_RETENTION=" + s.Retention.String(),
		"EVENTS_INBOX_RETENTION=" + s.InboxRetention.String(),
	}
	gl = append(append([]string{}, common...),
		"GL_CHECKPOINT_INTERVAL="+s.CheckpointInterval.String(),
		"GL_CHECKPOINT_LINES="+strconv.FormatInt(s.CheckpointLines, 10),
		"GL_CHECKPOINT_RETENTION="+s.CheckpointRetention.String())
	return common, gl
}

// Factor is how far one limit is scaled down, and how much production time the run stands for
// through it.
type Factor struct {
	Limit              string
	Production, Scaled string
	Ratio              float64 // production ÷ scaled
	Days               float64 // the run's length × Ratio, in days
}

// Equivalence says, for each limit that bounds what the services keep, how many days of
// production traffic a run of length d at the same rate stands for: d × production ÷ scaled.
// A stream of 1 MiB fills 1024 times sooner than one of 1 GiB at the same rate, and a minute's
// retention turns over 10080 times as often as a week's. The run stands for the least of them
// (Standing).
func Equivalence(s Scaled, d time.Duration) []Factor {
	day := 24 * time.Hour
	f := func(name string, prod, scaled float64, prodText, scaledText string) Factor {
		r := prod / scaled
		return Factor{Limit: name, Production: prodText, Scaled: scaledText, Ratio: r, Days: d.Hours() * r / 24}
	}
	dur := func(name string, prod, scaled time.Duration) Factor {
		return f(name, float64(prod), float64(scaled), days(prod, day), scaled.String())
	}
	return []Factor{
		f("stream bytes", float64(events.DefaultStreamMaxBytes), float64(s.StreamMaxBytes),
			size(events.DefaultStreamMaxBytes), size(s.StreamMaxBytes)),
		dur("stream max age", events.DefaultStreamMaxAge, s.StreamMaxAge),
		dur("outbox retention", outbox.DefaultRetention, s.Retention),
		dur("inbox retention", inbox.DefaultRetention, s.InboxRetention),
	}
}

// Standing is the least of the factors: the production days the run stands for in every limit.
func Standing(fs []Factor) Factor {
	least := Factor{Days: math.Inf(1)}
	for _, f := range fs {
		if f.Days < least.Days {
			least = f
		}
	}
	return least
}

func size(b int64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%g MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%g KiB", float64(b)/(1<<10))
}

func days(d, day time.Duration) string {
	return fmt.Sprintf("%g d", d.Hours()/day.Hours())
}
