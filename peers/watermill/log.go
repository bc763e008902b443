package main

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/rs/zerolog"
)

// watermillLogger gives Watermill's components our zerolog logger (stderr, JSON lines).
type watermillLogger struct{ log zerolog.Logger }

var _ watermill.LoggerAdapter = watermillLogger{}

func (w watermillLogger) Error(msg string, err error, fields watermill.LogFields) {
	w.log.Error().Err(err).Fields(map[string]any(fields)).Msg(msg)
}

func (w watermillLogger) Info(msg string, fields watermill.LogFields) {
	w.log.Info().Fields(map[string]any(fields)).Msg(msg)
}

func (w watermillLogger) Debug(msg string, fields watermill.LogFields) {
	w.log.Debug().Fields(map[string]any(fields)).Msg(msg)
}

func (w watermillLogger) Trace(msg string, fields watermill.LogFields) {
	w.log.Trace().Fields(map[string]any(fields)).Msg(msg)
}

func (w watermillLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return watermillLogger{w.log.With().Fields(map[string]any(fields)).Logger()}
}
