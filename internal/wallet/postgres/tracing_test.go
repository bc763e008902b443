package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/envtest"
	"walletgl/internal/tracing"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// storedTraceContext is the trace_context of the outbox row of transfer id.
func storedTraceContext(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) *string {
	t.Helper()
	var tc *string
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT o.trace_context FROM outbox o JOIN transfers t ON t.event_id = o.id WHERE t.id = $1", id).Scan(&tc))
	return tc
}

// Requests batched into shared transactions each get a commit span in their own trace, the
// child of their request's span, and their outbox row stores that span's traceparent; an
// untraced request gets no span and a NULL trace_context.
func TestEachBatchedTransferHasACommitSpanInItsOwnTraceThatItsOutboxRowStores(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	exporter := tracetest.NewInMemoryExporter()
	tp := tracing.NewWithExporter("wallet", exporter)
	store := postgres.NewStore(pool, postgres.Options{Tracer: tp.Tracer("test")})
	runBatcher(t, store)
	createWallet(t, store, "bank", "USD", true)
	createWallet(t, store, "alice", "USD", false)

	const requests = 40
	requestTracer := tp.Tracer("request")
	type traced struct {
		parent trace.SpanContext
		id     uuid.UUID
	}
	out := make([]traced, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			ctx, span := requestTracer.Start(context.Background(), "request")
			defer span.End()
			tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
				IdempotencyKey: fmt.Sprintf("traced-%d", i), FromWalletID: "bank", ToWalletID: "alice", Amount: 1, Currency: "USD",
			})
			require.NoError(t, err)
			out[i] = traced{parent: span.SpanContext(), id: tr.ID}
		})
	}
	wg.Wait()
	require.Greater(t, store.BatchStats().Requests, int64(0), "the requests went through the batcher")

	commits := map[string]tracetest.SpanStub{} // by span id
	for _, s := range exporter.GetSpans() {
		if s.Name == tracing.SpanCommit {
			commits[s.SpanContext.SpanID().String()] = s
		}
	}
	require.Len(t, commits, requests, "one commit span per request")
	for _, r := range out {
		stored := storedTraceContext(t, pool, r.id)
		require.NotNil(t, stored)
		ctx := tracing.WithTraceParent(context.Background(), *stored)
		sc := trace.SpanContextFromContext(ctx)
		require.Equal(t, r.parent.TraceID(), sc.TraceID(), "the row is in its request's trace")
		commit, ok := commits[sc.SpanID().String()]
		require.True(t, ok, "the row stores its commit span's context")
		require.Equal(t, r.parent.SpanID(), commit.Parent.SpanID(), "the commit span is the child of its request's span")
	}

	untraced, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "untraced", FromWalletID: "bank", ToWalletID: "alice", Amount: 1, Currency: "USD",
	})
	require.NoError(t, err)
	require.Nil(t, storedTraceContext(t, pool, untraced.ID), "an untraced request stores no trace context")
	require.Len(t, exporter.GetSpans(), 2*requests, "and makes no span")
}
