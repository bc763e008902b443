package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Check is one invariant and whether it held.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Counts are the run's numbers, read from the databases at the end.
type Counts struct {
	Confirmed        int   `json:"confirmed"`
	Refused          int   `json:"refused"`
	GaveUp           int   `json:"gave_up"`
	Requests         int64 `json:"requests"`
	Retried          int64 `json:"retried"`
	Transfers        int   `json:"transfers"`
	Reversals        int   `json:"reversals"`
	Holds            int   `json:"holds"`
	Batches          int   `json:"batches"`
	Posted           int   `json:"posted"`
	Republished      int64 `json:"republished"`
	BrokerDuplicates int64 `json:"broker_duplicates"`
	InboxDuplicates  int64 `json:"inbox_duplicates"`
	Faults           int   `json:"faults"`
	// Statuses counts the clients' attempts by the status they got (0: no answer).
	Statuses map[int]int `json:"statuses"`
}

// waitQuiet waits until every outbox row in both databases is terminal, the GL has as many
// entries as the wallet has movements (a transfer, or a batch or batch reversal with its legs), and no hold of the load's 1 s expiry is still pending:
// a hold placed just before the load ended expires after it, and the expiry worker voids it
// within its interval (a pending hold that is not yet past its expiry must be waited for too,
// or the check would find it pending a moment later). The load's other holds expire in an hour
// or a week.
func waitQuiet(ctx context.Context, s *System, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var walletOpen, glOpen, transfers, entries, expired int
		err := s.WalletDB.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM outbox WHERE status NOT IN ('acknowledged', 'dead_letter')),
			(SELECT count(DISTINCT coalesce(batch_id, batch_reversal_id, id)) FROM transfers),
			(SELECT count(*) FROM holds WHERE status = 'pending' AND expires_at < clock_timestamp() + interval '1 minute')`).Scan(&walletOpen, &transfers, &expired)
		if err == nil {
			err = s.GLDB.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM outbox WHERE status NOT IN ('acknowledged', 'dead_letter')),
				(SELECT count(*) FROM journal_entries WHERE hold_id IS NULL)`).Scan(&glOpen, &entries)
		}
		if err == nil && walletOpen == 0 && glOpen == 0 && entries == transfers && expired == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not quiet after %s: wallet outbox open %d, gl outbox open %d, transfers %d, entries %d, holds expiring within a minute still pending %d (last error: %v)",
				timeout, walletOpen, glOpen, transfers, entries, expired, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

type checker struct {
	ctx    context.Context
	wallet *pgxpool.Pool
	gl     *pgxpool.Pool
	checks []Check
}

func (c *checker) add(name string, passed bool, format string, args ...any) {
	c.checks = append(c.checks, Check{Name: name, Passed: passed, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) failed(name string, err error) {
	c.add(name, false, "could not check: %v", err)
}

// verify checks every invariant of the system against what the clients saw.
func verify(ctx context.Context, s *System, load LoadResult, allowDeadLetters bool) ([]Check, Counts) {
	c := &checker{ctx: ctx, wallet: s.WalletDB, gl: s.GLDB}
	counts := Counts{Confirmed: len(load.Confirmed), Refused: load.Refused, GaveUp: load.GaveUp,
		Requests: load.Requests, Retried: load.Retried, Statuses: load.Statuses()}

	transfers := c.confirmedExactlyOnce(load, &counts)
	c.postedExactlyOnce(transfers, &counts)
	c.reversalsLinked(load, &counts)
	c.holdsSettled(load, &counts)
	c.batchesAllOrNothing(load, &counts)
	c.outboxesTerminal(allowDeadLetters)
	c.noRelayStuck()
	c.inboxesClean(allowDeadLetters)
	c.debitsEqualCredits()
	c.balancesHold()
	c.readCounts(&counts)
	return c.checks, counts
}

type transferRow struct {
	id, key, currency string
	amount            int64
}

func (c *checker) confirmedExactlyOnce(load LoadResult, counts *Counts) map[string]transferRow {
	const name = "every confirmed transfer exists exactly once, one per key"
	// A movement as the GL posts it: a transfer or reversal, or a batch (batch reversal) with
	// its legs' total, under the key its client used.
	rows, err := c.wallet.Query(c.ctx, `SELECT coalesce(batch_id, batch_reversal_id, id)::text, min(idempotency_key), sum(amount)::bigint, currency
		FROM transfers GROUP BY 1, currency`)
	if err != nil {
		c.failed(name, err)
		return nil
	}
	byKey := map[string]transferRow{}
	byID := map[string]transferRow{}
	for rows.Next() {
		var t transferRow
		if err := rows.Scan(&t.id, &t.key, &t.amount, &t.currency); err != nil {
			c.failed(name, err)
			return nil
		}
		byKey[t.key], byID[t.id] = t, t
	}
	if err := rows.Err(); err != nil {
		c.failed(name, err)
		return nil
	}
	counts.Transfers = len(byID)
	var problems []string
	for key, id := range load.Confirmed {
		t, ok := byKey[key]
		switch {
		case !ok:
			problems = append(problems, "confirmed key "+key+" has no transfer")
		case t.id != id:
			problems = append(problems, fmt.Sprintf("key %s confirmed as %s but stored as %s", key, id, t.id))
		case t.amount != load.Amounts[key]:
			problems = append(problems, fmt.Sprintf("key %s amount %d, asked %d", key, t.amount, load.Amounts[key]))
		}
	}
	for key := range byKey {
		if _, ok := load.Confirmed[key]; !ok && load.GaveUp == 0 {
			problems = append(problems, "transfer for key "+key+" that no client saw confirmed")
		}
	}
	c.add(name, len(problems) == 0, "%d confirmed, %d transfers stored%s", len(load.Confirmed), len(byID), list(problems))
	return byID
}

func (c *checker) postedExactlyOnce(transfers map[string]transferRow, counts *Counts) {
	const name = "every transfer has exactly one GL entry with its amount and currency, nothing else"
	if transfers == nil {
		c.add(name, false, "no transfers read")
		return
	}
	rows, err := c.gl.Query(c.ctx, `
		SELECT e.transfer_id, e.currency,
		       coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)
		FROM journal_entries e JOIN journal_lines l ON l.entry_id = e.id
		WHERE e.hold_id IS NULL
		GROUP BY e.id`)
	if err != nil {
		c.failed(name, err)
		return
	}
	seen := map[string]int{}
	var problems []string
	for rows.Next() {
		var id, currency string
		var amount int64
		if err := rows.Scan(&id, &currency, &amount); err != nil {
			c.failed(name, err)
			return
		}
		seen[id]++
		t, ok := transfers[id]
		switch {
		case !ok:
			problems = append(problems, "GL entry for unknown transfer "+id)
		case t.amount != amount || t.currency != currency:
			problems = append(problems, fmt.Sprintf("transfer %s: %d %s in the wallet, %d %s in the GL", id, t.amount, t.currency, amount, currency))
		}
	}
	if err := rows.Err(); err != nil {
		c.failed(name, err)
		return
	}
	for id, n := range seen {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("transfer %s posted %d times", id, n))
		}
	}
	for id := range transfers {
		if seen[id] == 0 {
			problems = append(problems, "transfer "+id+" never posted")
		}
	}
	counts.Posted = len(seen)
	c.add(name, len(problems) == 0, "%d transfers, %d posted%s", len(transfers), len(seen), list(problems))
}

// reversalsLinked checks the reversals of the load: each confirmed one reverses the transfer
// its client named, in the wallet and in the GL (its entry reverses that transfer's entry),
// and every transfer's reversed_amount is the sum of its reversals.
func (c *checker) reversalsLinked(load LoadResult, counts *Counts) {
	const name = "every reversal is linked to its transfer in both services, and its running total is right"
	// Keyed as the GL keys entries: a batch reversal's legs by the batch reversal, their
	// originals by their batch.
	wallet, err := c.pairs(c.wallet, `SELECT DISTINCT coalesce(r.batch_reversal_id, r.id)::text, coalesce(o.batch_id, o.id)::text
		FROM transfers r JOIN transfers o ON o.id = r.reverses_transfer_id`)
	if err != nil {
		c.failed(name, err)
		return
	}
	gl, err := c.pairs(c.gl, `SELECT r.transfer_id, o.transfer_id FROM journal_entries r
		JOIN journal_entries o ON o.id = r.reverses_entry_id`)
	if err != nil {
		c.failed(name, err)
		return
	}
	var wrongTotals int
	if err := c.wallet.QueryRow(c.ctx, `SELECT count(*) FROM transfers o WHERE o.reversed_amount <>
		coalesce((SELECT sum(r.amount) FROM transfers r WHERE r.reverses_transfer_id = o.id), 0)`).Scan(&wrongTotals); err != nil {
		c.failed(name, err)
		return
	}
	var problems []string
	for key, original := range load.Reversals {
		id, ok := load.Confirmed[key]
		if !ok {
			continue // refused (funds spent, nothing left to reverse), skipped or unanswered
		}
		if want := load.Confirmed[original]; wallet[id] != want {
			problems = append(problems, fmt.Sprintf("reversal %s reverses %q in the wallet, its client asked for %s", id, wallet[id], want))
		}
	}
	for id, original := range wallet {
		if gl[id] != original {
			problems = append(problems, fmt.Sprintf("reversal %s reverses %s in the wallet, %q in the GL", id, original, gl[id]))
		}
	}
	if len(gl) != len(wallet) {
		problems = append(problems, fmt.Sprintf("%d reversals in the wallet, %d reversing entries in the GL", len(wallet), len(gl)))
	}
	if wrongTotals > 0 {
		problems = append(problems, fmt.Sprintf("%d transfers whose reversed_amount is not the sum of their reversals", wrongTotals))
	}
	counts.Reversals = len(wallet)
	c.add(name, len(problems) == 0, "%d reversals (%d asked, %d skipped: their transfer was not confirmed)%s",
		len(wallet), len(load.Reversals), load.Skipped, list(problems))
}

// pairs reads a two-column query of ids into a map from the first to the second.
func (c *checker) pairs(db *pgxpool.Pool, query string) (map[string]string, error) {
	rows, err := db.Query(c.ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read pairs: %w", err)
	}
	m := map[string]string{}
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, fmt.Errorf("scan pair: %w", err)
		}
		m[a] = b
	}
	return m, rows.Err()
}

func (c *checker) outboxesTerminal(allowDeadLetters bool) {
	for _, side := range []struct {
		name string
		db   *pgxpool.Pool
	}{{"wallet", c.wallet}, {"gl", c.gl}} {
		name := "every " + side.name + " outbox row is acknowledged"
		rows, err := side.db.Query(c.ctx, "SELECT status, count(*) FROM outbox GROUP BY status ORDER BY status")
		if err != nil {
			c.failed(name, err)
			continue
		}
		var parts []string
		ok := true
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				c.failed(name, err)
				break
			}
			parts = append(parts, fmt.Sprintf("%s %d", status, n))
			if status != "acknowledged" && !(allowDeadLetters && status == "dead_letter") {
				ok = false
			}
		}
		rows.Close()
		c.add(name, ok, "%s", strings.Join(parts, ", "))
	}
}

// noRelayStuck names one cause of rows left open: rows that a live relay would have taken and
// none did. A row still dispatching after its lease ran out was claimed by a relay that never
// finished its round (any relay may claim an expired lease); a pending or failed row that has
// been due for a publish, untouched, for longer than any relay's poll or backoff was never
// claimed at all. Checked once the drain is over, when the broker is whole again.
func (c *checker) noRelayStuck() {
	const name = "no outbox row left waiting for a relay: dispatching past its lease, or due and untouched (a stuck relay)"
	var parts []string
	ok := true
	for _, side := range []struct {
		name string
		db   *pgxpool.Pool
	}{{"wallet", c.wallet}, {"gl", c.gl}} {
		var expired, unclaimed int
		var oldest *time.Duration
		err := side.db.QueryRow(c.ctx, `SELECT
			count(*) FILTER (WHERE status = 'dispatching' AND lease_until < clock_timestamp()),
			count(*) FILTER (WHERE status IN ('pending', 'failed')
				AND coalesce(next_attempt_at, updated_at) < clock_timestamp() - interval '30 seconds'),
			max(clock_timestamp() - CASE WHEN status = 'dispatching' THEN lease_until
				ELSE coalesce(next_attempt_at, updated_at) END)
			FROM outbox WHERE status IN ('dispatching', 'pending', 'failed')`).Scan(&expired, &unclaimed, &oldest)
		if err != nil {
			c.failed(name, err)
			return
		}
		part := fmt.Sprintf("%s %d past their lease, %d due and unclaimed", side.name, expired, unclaimed)
		if expired+unclaimed > 0 {
			ok = false
			if oldest != nil {
				part += fmt.Sprintf(" (oldest for %s)", oldest.Round(time.Second))
			}
		}
		parts = append(parts, part)
	}
	c.add(name, ok, "%s", strings.Join(parts, "; "))
}

func (c *checker) inboxesClean(allowFailed bool) {
	for _, side := range []struct {
		name string
		db   *pgxpool.Pool
	}{{"gl", c.gl}, {"wallet", c.wallet}} {
		// A waiting event left at the end waits for one that never posted: every original is
		// published until acknowledged, so after a run none may be left waiting.
		name := "no " + side.name + " inbox event failed, stuck processing or left waiting"
		var failed, processing, waiting int
		var waitsFor []string
		err := side.db.QueryRow(c.ctx, `SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'processing'),
			count(*) FILTER (WHERE status = 'waiting'), coalesce((array_agg(waits_for ORDER BY received_at) FILTER (WHERE status = 'waiting'))[1:5], '{}')
			FROM inbox`).Scan(&failed, &processing, &waiting, &waitsFor)
		if err != nil {
			c.failed(name, err)
			continue
		}
		detail := fmt.Sprintf("failed %d, processing %d, waiting %d", failed, processing, waiting)
		if waiting > 0 {
			detail += " (waiting for " + strings.Join(waitsFor, ", ") + ")"
		}
		c.add(name, processing == 0 && waiting == 0 && (failed == 0 || allowFailed), "%s", detail)
	}
}

func (c *checker) debitsEqualCredits() {
	const name = "debits equal credits, in every entry and in total"
	var debits, credits int64
	var unbalanced int
	err := c.gl.QueryRow(c.ctx, `
		SELECT coalesce(sum(d), 0), coalesce(sum(cr), 0), count(*) FILTER (WHERE d <> cr)
		FROM (SELECT sum(amount) FILTER (WHERE direction = 'debit') AS d,
		             sum(amount) FILTER (WHERE direction = 'credit') AS cr
		      FROM journal_lines GROUP BY entry_id) e`).Scan(&debits, &credits, &unbalanced)
	if err != nil {
		c.failed(name, err)
		return
	}
	c.add(name, debits == credits && unbalanced == 0, "debits %d, credits %d, unbalanced entries %d", debits, credits, unbalanced)
}

func (c *checker) balancesHold() {
	const name = "balances: zero-sum per currency, each equals its transfers, none past its limits"
	var problems []string
	// A wallet's floor is its minimum, less the forced reversals (chargebacks) out of it, each
	// of which may take it below by at most its amount.
	rows, err := c.wallet.Query(c.ctx, `
		SELECT w.id, w.balance, w.allow_negative,
		       coalesce((SELECT sum(amount) FROM transfers WHERE to_wallet_id = w.id), 0)
		     - coalesce((SELECT sum(amount) FROM transfers WHERE from_wallet_id = w.id), 0),
		       w.balance - w.held,
		       w.min_balance - coalesce((SELECT sum(amount) FROM transfers WHERE forced AND from_wallet_id = w.id), 0),
		       coalesce(w.max_balance, 9223372036854775807)
		FROM wallets w`)
	if err != nil {
		c.failed(name, err)
		return
	}
	var total int64
	for rows.Next() {
		var id string
		var balance, net, available, floor, ceiling int64
		var allowNegative bool
		if err := rows.Scan(&id, &balance, &allowNegative, &net, &available, &floor, &ceiling); err != nil {
			c.failed(name, err)
			return
		}
		total += balance
		if balance != net {
			problems = append(problems, fmt.Sprintf("wallet %s balance %d, transfers say %d", id, balance, net))
		}
		if available < floor && !allowNegative {
			problems = append(problems, fmt.Sprintf("wallet %s below its floor %d: %d available", id, floor, available))
		}
		if balance > ceiling {
			problems = append(problems, fmt.Sprintf("wallet %s above its maximum %d: %d", id, ceiling, balance))
		}
	}
	if err := rows.Err(); err != nil {
		c.failed(name, err)
		return
	}
	if total != 0 {
		problems = append(problems, fmt.Sprintf("balances sum to %d, not 0", total))
	}
	c.add(name, len(problems) == 0, "sum of balances %d%s", total, list(problems))
}

func (c *checker) readCounts(counts *Counts) {
	_ = c.wallet.QueryRow(c.ctx, `SELECT coalesce(sum(greatest(publish_count - 1, 0)), 0), coalesce(sum(broker_duplicates), 0) FROM outbox`).
		Scan(&counts.Republished, &counts.BrokerDuplicates)
	_ = c.gl.QueryRow(c.ctx, `SELECT coalesce(sum(duplicates), 0) FROM inbox`).Scan(&counts.InboxDuplicates)
}

func list(problems []string) string {
	if len(problems) == 0 {
		return ""
	}
	sort.Strings(problems)
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("… and %d more", len(problems)-10))
	}
	return "; " + strings.Join(problems, "; ")
}
