package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metadata"
)

// indexesOf are the names of the indexes the plan nodes under n read.
func indexesOf(n scanNode) []string {
	var names []string
	if n.Index != "" {
		names = append(names, n.Index)
	}
	for _, c := range n.Plans {
		names = append(names, indexesOf(c)...)
	}
	return names
}

// TestTheMetadataFilterUsesItsIndexBeforeAnyAnalyze: right after a bulk load, before any
// ANALYZE, a listing filtered by metadata finds its few entries through the GIN index
// (journal_entries_metadata_idx), in a generic plan, rather than walking every entry in
// posting order and filtering.
func TestTheMetadataFilterUsesItsIndexBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "gl")
	ctx := context.Background()

	postUSDEntries(t, pool, 20_000)
	_, err := pool.Exec(ctx, `
		WITH e AS (
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, metadata)
			SELECT gen_random_uuid(), 'ev-' || gen_random_uuid(), 'tr-' || gen_random_uuid(), 'USD', now(),
			       jsonb_build_object('order_id', 'o-' || (i % 2), 'shop', 'eu')
			FROM generate_series(1, 6) AS i
			RETURNING id)
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		SELECT id, v.account, v.direction, 100, 'USD', 'w-1' FROM e, (VALUES ('1010', 'debit'), ('2010', 'credit')) AS v(account, direction)`)
	require.NoError(t, err)
	postUSDEntries(t, pool, 20_000)
	var analyzed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename = 'journal_entries'`).Scan(&analyzed))
	require.Zero(t, analyzed, "journal_entries has no statistics yet")

	explained := newExplainedPool(t, url)
	reads := postgres.NewLedger(explained.pool)
	page, err := reads.Entries(ctx, gl.EntryQuery{Metadata: metadata.Metadata{"order_id": "o-1", "shop": "eu"}, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	require.NotEmpty(t, page.NextCursor)

	scans := explained.scansOf(t, "ListEntriesByMetadata", "journal_entries", func() error {
		page, err := reads.Entries(ctx, gl.EntryQuery{Metadata: metadata.Metadata{"order_id": "o-1"}, After: page.NextCursor, Limit: 2})
		if err == nil {
			require.Len(t, page.Entries, 1)
		}
		return err
	})
	var indexes []string
	pages := 0
	for _, s := range scans {
		require.NotEqual(t, "Seq Scan", s.NodeType, "a sequential scan of journal_entries: %+v", scans)
		indexes = append(indexes, indexesOf(s)...)
		pages += s.SharedHit + s.SharedRead
	}
	t.Logf("journal_entries: %d pages by %+v", pages, scans)
	require.Contains(t, indexes, "journal_entries_metadata_idx", "the plan reads the GIN index: %+v", scans)
	// 6 matches among 40,006 entries (about 600 pages): the GIN index's few pages, the
	// matches' and the cursor's.
	require.LessOrEqual(t, pages, 30, "the filter read %d pages of journal_entries", pages)
}
