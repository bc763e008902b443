// Package logging builds the services' zerolog loggers from their LOG_* settings.
package logging

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"walletgl/internal/config"
)

// Config holds the logging settings.
type Config struct {
	Format string
	Level  string
}

// Bind declares the logging settings.
func (c *Config) Bind(s *config.Set) {
	s.String(&c.Format, "LOG_FORMAT", "log-format", "auto", "json, console (coloured), console-plain, or auto (console on a terminal, json otherwise)")
	s.String(&c.Level, "LOG_LEVEL", "log-level", "info", "debug, info, warn or error")
}

// Logger builds the service's logger writing to w.
func (c Config) Logger(w io.Writer, service string) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("LOG_LEVEL: %w", err)
	}
	switch c.Format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	case "console-plain":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: true}
	case "auto", "":
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	default:
		return zerolog.Nop(), fmt.Errorf("LOG_FORMAT: %q is not json, console, console-plain or auto", c.Format)
	}
	// Loggers write from many goroutines (the NATS client's callbacks among them): one write at
	// a time, whatever w is (a test's buffer is not safe for concurrent writes).
	return zerolog.New(zerolog.SyncWriter(w)).Level(level).With().Timestamp().Str("service", service).Logger(), nil
}
