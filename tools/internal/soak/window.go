package soak

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/events/contract"
	"walletgl/tools/internal/bench"
	"walletgl/tools/internal/chaos"
)

// sampler measures the system at the end of each window. It keeps the transfers the GL has not
// posted yet (by id, with their commit time), so that each window's latencies are those of the
// transfers posted during it, and a transfer committed more than a window ago and still not
// posted is counted late.
type sampler struct {
	sys     *chaos.System
	js      jetstream.JetStream
	closeJS func()
	window  time.Duration
	pending map[string]time.Time // transfer id → created_at in the wallet's database
	since   time.Time            // the last window's end
	// seen holds the transfers read lately: each window reads back overlap before since, for
	// the transactions that had inserted their row but not committed when the last one read.
	seen map[string]time.Time
}

// overlap is how long a wallet transaction may stay open between its insert and its commit
// and still have its transfer measured.
const overlap = 30 * time.Second

func newSampler(sys *chaos.System, window time.Duration) (*sampler, error) {
	js, closeJS, err := sys.JetStream()
	if err != nil {
		return nil, err
	}
	return &sampler{sys: sys, js: js, closeJS: closeJS, window: window, pending: map[string]time.Time{}, seen: map[string]time.Time{}}, nil
}

func (s *sampler) close() { s.closeJS() }

// The tables whose rows the soak counts: what the services delete after a retention (outbox,
// inbox, the GL's balance checkpoints) and what they only add to (audit_log: one row per key
// operation, few in a soak).
var (
	walletTables = []string{"outbox", "inbox", "audit_log"}
	glTables     = []string{"outbox", "inbox", "audit_log", "balance_checkpoints"}
)

func (s *sampler) sample(ctx context.Context, index int, since time.Duration) Window {
	w := Window{Index: index, Seconds: since.Seconds(), Streams: map[string]StreamSize{}, Rows: map[string]int64{}, RSS: map[string]float64{}, P50: math.NaN(), P99: math.NaN()}
	for _, source := range []string{contract.SourceWallet, contract.SourceGL} {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if st, err := s.js.Stream(sctx, s.sys.StreamName(source)); err == nil {
			if info, err := st.Info(sctx); err == nil {
				w.Streams[source] = StreamSize{Bytes: info.State.Bytes, Msgs: info.State.Msgs}
			}
		}
		cancel()
	}
	for _, side := range []struct {
		name   string
		tables []string
		count  func(context.Context, string) (int64, error)
	}{
		{"wallet", walletTables, func(ctx context.Context, t string) (n int64, err error) {
			err = s.sys.WalletDB.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n)
			return n, err
		}},
		{"gl", glTables, func(ctx context.Context, t string) (n int64, err error) {
			err = s.sys.GLDB.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n)
			return n, err
		}},
	} {
		for _, t := range side.tables {
			if n, err := side.count(ctx, t); err == nil {
				w.Rows[side.name+" "+t] = n
			}
		}
	}
	for name, pid := range map[string]int{"wallet": s.sys.Wallets[0].PID(), "gl": s.sys.GLs[0].PID(), "nats": s.sys.Brokers[0].PID()} {
		if pid == 0 {
			continue
		}
		if rss, _, err := bench.ResidentMiB(pid); err == nil {
			w.RSS[name] = rss
		}
	}
	s.latencies(ctx, &w)
	return w
}

// latencies adds the transfers committed since the last window to pending, takes out those the
// GL has posted, with their commit→posted latency, and counts the late and the doubled.
func (s *sampler) latencies(ctx context.Context, w *Window) {
	var cut time.Time
	if err := s.sys.WalletDB.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&cut); err != nil {
		return
	}
	// Keyed as the GL keys its entries: a batch's (or batch reversal's) legs are one entry.
	rows, err := s.sys.WalletDB.Query(ctx, `SELECT coalesce(batch_id, batch_reversal_id, id)::text, min(created_at)
		FROM transfers WHERE created_at >= $1 GROUP BY 1`, s.since.Add(-overlap))
	if err != nil {
		return
	}
	for rows.Next() {
		var id string
		var created time.Time
		if rows.Scan(&id, &created) != nil {
			continue
		}
		if _, ok := s.seen[id]; !ok {
			s.seen[id], s.pending[id] = created, created
		}
	}
	rows.Close()
	if rows.Err() != nil {
		return
	}
	s.since = cut
	for id, created := range s.seen {
		if created.Before(cut.Add(-2 * overlap)) {
			delete(s.seen, id)
		}
	}
	ids := make([]string, 0, len(s.pending))
	for id := range s.pending {
		ids = append(ids, id)
	}
	posted, err := s.sys.GLDB.Query(ctx, "SELECT transfer_id, min(posted_at) FROM journal_entries WHERE hold_id IS NULL AND transfer_id = ANY($1) GROUP BY transfer_id", ids)
	if err != nil {
		return
	}
	var lat []time.Duration
	for posted.Next() {
		var id string
		var at time.Time
		if posted.Scan(&id, &at) == nil {
			lat = append(lat, at.Sub(s.pending[id]))
			delete(s.pending, id)
		}
	}
	posted.Close()
	if len(lat) > 0 {
		slices.Sort(lat)
		w.Posted = len(lat)
		w.P50 = ms(bench.Percentile(lat, 50))
		w.P99 = ms(bench.Percentile(lat, 99))
	}
	for _, created := range s.pending {
		if cut.Sub(created) > s.window {
			w.Late++
		}
	}
	_ = s.sys.GLDB.QueryRow(ctx, `SELECT count(*) FROM (SELECT transfer_id FROM journal_entries
		WHERE hold_id IS NULL GROUP BY transfer_id HAVING count(*) > 1) d`).Scan(&w.Doubled)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// header names the columns of line: the streams' KiB and messages, the tables' rows, the
// processes' resident MiB, the window's posted transfers and their latency, late and doubled.
var header = fmt.Sprintf("%4s %6s | %13s %13s | %6s %6s | %7s %7s | %5s %5s | %5s | %5s %5s %5s | %6s %8s %8s | %5s %4s | %s",
	"win", "min", "wallet KiB/n", "gl KiB/n", "outbox", "gl", "inbox", "gl", "audit", "gl", "ckpt",
	"RSS w", "gl", "nats", "posted", "p50 ms", "p99 ms", "late", "dbl", "outages")

// line is the window's row under header.
func (w Window) line() string {
	stream := func(name string) string {
		s, ok := w.Streams[name]
		if !ok {
			return "?"
		}
		return fmt.Sprintf("%.0f/%d", float64(s.Bytes)/1024, s.Msgs)
	}
	return fmt.Sprintf("%4d %6.1f | %13s %13s | %6d %6d | %7d %7d | %5d %5d | %5d | %5.0f %5.0f %5.0f | %6d %8s %8s | %5d %4d | %s",
		w.Index, w.Seconds/60, stream("wallet"), stream("gl"),
		w.Rows["wallet outbox"], w.Rows["gl outbox"], w.Rows["wallet inbox"], w.Rows["gl inbox"],
		w.Rows["wallet audit_log"], w.Rows["gl audit_log"], w.Rows["gl balance_checkpoints"],
		w.RSS["wallet"], w.RSS["gl"], w.RSS["nats"], w.Posted, num(w.P50), num(w.P99), w.Late, w.Doubled, strings.Join(w.Faults, "; "))
}

// csv is the windows as comma-separated values, one row each.
func csv(ws []Window) string {
	var b strings.Builder
	b.WriteString("window,seconds,wallet_stream_bytes,wallet_stream_msgs,gl_stream_bytes,gl_stream_msgs,")
	b.WriteString("wallet_outbox,wallet_inbox,wallet_audit_log,gl_outbox,gl_inbox,gl_audit_log,gl_balance_checkpoints,")
	b.WriteString("wallet_rss_mib,gl_rss_mib,nats_rss_mib,posted,p50_ms,p99_ms,late,doubled,outages\n")
	for _, w := range ws {
		fmt.Fprintf(&b, "%d,%.1f,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.1f,%.1f,%.1f,%d,%.1f,%.1f,%d,%d,%q\n",
			w.Index, w.Seconds, w.Streams["wallet"].Bytes, w.Streams["wallet"].Msgs, w.Streams["gl"].Bytes, w.Streams["gl"].Msgs,
			w.Rows["wallet outbox"], w.Rows["wallet inbox"], w.Rows["wallet audit_log"],
			w.Rows["gl outbox"], w.Rows["gl inbox"], w.Rows["gl audit_log"], w.Rows["gl balance_checkpoints"],
			w.RSS["wallet"], w.RSS["gl"], w.RSS["nats"], w.Posted, w.P50, w.P99, w.Late, w.Doubled, strings.Join(w.Faults, "; "))
	}
	return b.String()
}
