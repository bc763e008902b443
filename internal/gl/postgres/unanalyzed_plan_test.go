package postgres_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

// scanNode is the part of an auto_explain JSON plan that says how a node reads a relation.
type scanNode struct {
	NodeType   string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Index      string     `json:"Index Name"`
	SharedHit  int        `json:"Shared Hit Blocks"`
	SharedRead int        `json:"Shared Read Blocks"`
	Plans      []scanNode `json:"Plans"`
}

// scansOf runs read and returns the nodes of the plan of the statement named query (its sqlc
// name) that read relation.
func (p *explainedPool) scansOf(t *testing.T, query, relation string, read func() error) []scanNode {
	t.Helper()
	p.mu.Lock()
	p.notices = nil
	p.mu.Unlock()
	require.NoError(t, read())
	p.mu.Lock()
	defer p.mu.Unlock()
	var scans []scanNode
	found := false
	for _, n := range p.notices {
		_, plan, ok := strings.Cut(n, "plan:")
		if !ok || !strings.Contains(plan, "-- name: "+query+" ") {
			continue
		}
		var explained struct {
			Plan scanNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &explained), "auto_explain's plan of %s", query)
		found = true
		var walk func(scanNode)
		walk = func(n scanNode) {
			if n.Relation == relation {
				scans = append(scans, n)
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(explained.Plan)
	}
	require.True(t, found, "auto_explain showed the plan of %s; notices: %q", query, p.notices)
	return scans
}

// TestReadsUseTheirIndexesBeforeAnyAnalyze: right after a bulk load, before any ANALYZE (and
// autovacuum off), the planner has no statistics of journal_lines. The trial balance, a
// balance and a statement must still read the lines through an index, bounded by the latest
// checkpoint, not scan the table: a bound the planner rates without statistics.
func TestReadsUseTheirIndexesBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	ledger := postgres.NewLedger(pool)

	postUSDEntries(t, pool, 100_000)    // 200,000 lines
	time.Sleep(1100 * time.Millisecond) // the checkpoint's bound is before now
	_, taken, err := ledger.Checkpoint(ctx)
	require.NoError(t, err)
	require.True(t, taken)
	postUSDEntries(t, pool, 10)
	var analyzed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename = 'journal_lines'`).Scan(&analyzed))
	require.Zero(t, analyzed, "journal_lines has no statistics yet")
	var lastLine int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) FROM journal_lines WHERE account_code = '2010'`).Scan(&lastLine))

	explained := newExplainedPool(t, url)
	reads := postgres.NewLedger(explained.pool)
	// The lines after the checkpoint are 20 (10 per account), a few pages of an index; the
	// table is about 1,500 pages.
	const bound = 30
	for _, tc := range []struct {
		name, query string
		read        func() error
	}{
		{"the trial balance", "TrialBalance", func() error {
			tb, err := reads.TrialBalance(ctx)
			if err == nil {
				require.True(t, tb.Balanced)
				require.Equal(t, []gl.CurrencyTotal{{Currency: "USD", Debits: gl.SumOf(100 * 100_010), Credits: gl.SumOf(100 * 100_010), Balanced: true}}, tb.Currencies)
			}
			return err
		}},
		{"a balance", "AccountBalance", func() error {
			b, err := reads.AccountBalance(ctx, "2010", "USD", nil)
			if err == nil {
				require.Equal(t, gl.SumOf(100*100_010), b.Balance())
			}
			return err
		}},
		{"a statement's page after a cursor", "AccountStatement", func() error {
			st, err := reads.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", After: strconv.FormatInt(lastLine-4, 10), Limit: 3})
			if err == nil {
				require.NotEmpty(t, st.Lines)
			}
			return err
		}},
	} {
		scans := explained.scansOf(t, tc.query, "journal_lines", tc.read)
		require.NotEmpty(t, scans, "%s: the plan reads journal_lines", tc.name)
		pages := 0
		for _, s := range scans {
			require.NotEqual(t, "Seq Scan", s.NodeType, "%s: a sequential scan of journal_lines before any ANALYZE: %+v", tc.name, scans)
			pages += s.SharedHit + s.SharedRead
		}
		t.Logf("%s: %d pages of journal_lines by %+v", tc.name, pages, scans)
		require.LessOrEqual(t, pages, bound, "%s: %d pages of journal_lines", tc.name, pages)
	}
}
