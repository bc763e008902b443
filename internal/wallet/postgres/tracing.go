package postgres

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/tracing"
)

// startCommit begins the commit span of a request whose context is traced (the API's server
// span), as its child, and gives p the span and its traceparent for the outbox row. The span
// covers the request's wait for a batch and its transaction: each request of a batch has its
// own, in its own trace. An untraced request gets neither, and ctx comes back as it is.
func (s *Store) startCommit(ctx context.Context, p *pendingTransfer) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	ctx, p.span = s.tracer.Start(ctx, tracing.SpanCommit, trace.WithAttributes(
		attribute.String("walletgl.transfer_id", p.transferID.String()),
		attribute.String("walletgl.event_id", p.eventID.String()),
	))
	p.traceParent = tracing.TraceParent(ctx)
	return ctx
}

// endCommit ends p's commit span with the request's answer.
func (p *pendingTransfer) endCommit(r transferResult, err error) {
	if p.span == nil {
		return
	}
	if p.span.IsRecording() {
		p.span.SetAttributes(attribute.Bool("walletgl.replayed", r.replayed))
	}
	tracing.EndSpan(p.span, err)
}

// noteBatch records on the commit spans of batch how many requests shared its transaction, and
// whether it fell back to a transaction per request.
func noteBatch(batch []*pendingTransfer, fellBack bool) {
	for _, p := range batch {
		if p.span != nil && p.span.IsRecording() {
			p.span.SetAttributes(attribute.Int("walletgl.batch_size", len(batch)), attribute.Bool("walletgl.batch_fallback", fellBack))
		}
	}
}
