package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"

	"walletgl/internal/systemtest"
)

// holdEvery makes one job in that many, past the first clients' worth, a hold: placed on a
// user's wallet, then captured in part to another user, voided, or left to expire — the
// two-phase movement in the mix of the fault scenarios.
const holdEvery = 8

// How a hold of the load ends, as its client saw it (HoldOutcome.Want).
const (
	holdCaptured = "captured"
	holdVoided   = "voided"
	holdExpired  = "expired"
	holdPending  = "pending" // its capture was refused: the hold stays until it expires (1 h)
)

// holdPlan is a hold job: place Amount on Wallet, then capture CaptureAmount of it to To,
// void it, or place it with a 1 s expiry and leave it (End).
type holdPlan struct {
	wallet, to    string
	amount        int64
	captureAmount int64
	end           string // holdCaptured, holdVoided or holdExpired
}

// HoldOutcome is what a hold's client saw: the hold placed as ID, and how it should end.
type HoldOutcome struct {
	ID       string
	Amount   int64
	Want     string
	Captured int64
}

func newHoldPlan(rng *rand.Rand, users []string) *holdPlan {
	p := &holdPlan{wallet: users[rng.IntN(len(users))], amount: int64(1 + rng.IntN(60))}
	p.to = users[rng.IntN(len(users))]
	for p.to == p.wallet {
		p.to = users[rng.IntN(len(users))]
	}
	p.captureAmount = 1 + rng.Int64N(p.amount)
	p.end = []string{holdCaptured, holdVoided, holdExpired}[rng.IntN(3)]
	return p
}

// sendHold runs a hold job: each step retried with its own Idempotency-Key until it gets a
// definitive answer (a void needs none: voiding a voided hold answers the hold again).
func (g *loadGen) sendHold(ctx context.Context, client int, j job) {
	p := j.hold
	body := map[string]any{"wallet_id": p.wallet, "amount": p.amount, "currency": currency}
	if p.end == holdExpired {
		body["expires_in"] = 1
	}
	resp, ok := g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
		return c.Do(ctx, http.MethodPost, "/v1/holds", body, map[string]string{"Idempotency-Key": j.key})
	}, answered)
	if !ok {
		return
	}
	var hold struct {
		ID                string `json:"id"`
		CaptureTransferID string `json:"capture_transfer_id"`
		CapturedAmount    int64  `json:"captured_amount"`
	}
	if resp.Status != http.StatusCreated || json.Unmarshal(resp.Body, &hold) != nil {
		g.mu.Lock()
		g.res.Refused++ // not enough available
		g.mu.Unlock()
		return
	}
	out := &HoldOutcome{ID: hold.ID, Amount: p.amount, Want: holdExpired}
	g.mu.Lock()
	g.res.Holds[j.key] = out
	g.mu.Unlock()
	switch p.end {
	case holdCaptured:
		captureKey := j.key + "-capture"
		resp, ok = g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
			return c.Do(ctx, http.MethodPost, "/v1/holds/"+hold.ID+"/capture",
				map[string]any{"to_wallet_id": p.to, "amount": p.captureAmount}, map[string]string{"Idempotency-Key": captureKey})
		}, answered)
		g.mu.Lock()
		defer g.mu.Unlock()
		switch {
		case !ok:
			out.Want = "" // unknown: the client gave up
		case resp.Status == http.StatusCreated && json.Unmarshal(resp.Body, &hold) == nil:
			out.Want, out.Captured = holdCaptured, hold.CapturedAmount
			g.res.Confirmed[captureKey], g.res.Amounts[captureKey] = hold.CaptureTransferID, hold.CapturedAmount
		default:
			out.Want = holdPending
			g.res.Refused++
		}
	case holdVoided:
		resp, ok = g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
			return c.Do(ctx, http.MethodPost, "/v1/holds/"+hold.ID+"/void", nil, nil)
		}, answered)
		g.mu.Lock()
		defer g.mu.Unlock()
		out.Want = ""
		if ok && resp.Status == http.StatusOK {
			out.Want = holdVoided
		}
	}
}

// answered reports whether resp is the request's answer, not a reason to ask again: anything
// but a 5xx, a 429 or a key still in flight.
func answered(resp systemtest.Response) bool {
	return resp.Status < 500 && resp.Status != http.StatusTooManyRequests && resp.Status != http.StatusConflict ||
		resp.Status == http.StatusConflict && resp.Header.Get("Retry-After") == ""
}

// walletHold is a row of the wallet's holds.
type walletHold struct {
	id, status, reason string
	amount, captured   int64
}

// holdsSettled checks the holds of the load: each placed hold exists once with its amount and
// ended as its client saw (captured with its amount, voided, or voided by its expiry); each
// wallet's held is its pending holds; the GL has each hold's placement, a release exactly for
// the finished ones, nothing for holds the wallet does not have, and account 2020 holds the
// pending holds' total.
func (c *checker) holdsSettled(load LoadResult, counts *Counts) {
	const name = "every hold ended as its client saw, held equals the pending holds, and the GL has each placement and release"
	rows, err := c.wallet.Query(c.ctx, `SELECT id::text, idempotency_key, status, coalesce(void_reason, ''), amount, coalesce(captured_amount, 0) FROM holds`)
	if err != nil {
		c.failed(name, err)
		return
	}
	byKey := map[string]walletHold{}
	var pending int
	var pendingTotal int64
	for rows.Next() {
		var h walletHold
		var key string
		if err := rows.Scan(&h.id, &key, &h.status, &h.reason, &h.amount, &h.captured); err != nil {
			c.failed(name, err)
			return
		}
		byKey[key] = h
		if h.status == holdPending {
			pending++
			pendingTotal += h.amount
		}
	}
	if err := rows.Err(); err != nil {
		c.failed(name, err)
		return
	}
	var problems []string
	for key, want := range load.Holds {
		h, ok := byKey[key]
		if !ok || h.id != want.ID || h.amount != want.Amount {
			problems = append(problems, fmt.Sprintf("hold %s (key %s, %d) stored as %+v", want.ID, key, want.Amount, h))
			continue
		}
		if got := holdEnd(h.status, h.reason); want.Want != "" && got != want.Want || want.Want == holdCaptured && h.captured != want.Captured {
			problems = append(problems, fmt.Sprintf("hold %s ended %s (captured %d), its client saw %s (captured %d)", h.id, got, h.captured, want.Want, want.Captured))
		}
	}
	for key, h := range byKey {
		if _, ok := load.Holds[key]; !ok && load.GaveUp == 0 {
			problems = append(problems, "hold "+h.id+" that no client saw placed")
		}
	}
	var heldOff int
	if err := c.wallet.QueryRow(c.ctx, `SELECT count(*) FROM wallets w WHERE w.held <>
		coalesce((SELECT sum(amount) FROM holds h WHERE h.wallet_id = w.id AND h.status = 'pending'), 0)`).Scan(&heldOff); err != nil {
		c.failed(name, err)
		return
	}
	if heldOff > 0 {
		problems = append(problems, fmt.Sprintf("%d wallets whose held is not their pending holds' total", heldOff))
	}
	problems = append(problems, c.glHoldProblems(byKey, pendingTotal)...)
	counts.Holds = len(byKey)
	c.add(name, len(problems) == 0, "%d holds, %d of them pending (%d held)%s", len(byKey), pending, pendingTotal, list(problems))
}

func holdEnd(status, reason string) string {
	if status == holdVoided && reason == "expired" {
		return holdExpired
	}
	return status
}

// glHoldProblems compares the GL's hold entries with the wallet's holds (by key) and the hold
// account's balance with the pending holds' total.
func (c *checker) glHoldProblems(byKey map[string]walletHold, pendingTotal int64) []string {
	type posted struct {
		placed   int64
		released bool
	}
	rows, err := c.gl.Query(c.ctx, `SELECT e.hold_id, e.transfer_id = 'hold:' || e.hold_id || ':released',
		(SELECT sum(amount) FROM journal_lines l WHERE l.entry_id = e.id AND l.direction = 'debit')
		FROM journal_entries e WHERE e.hold_id IS NOT NULL`)
	if err != nil {
		return []string{fmt.Sprintf("read the GL's hold entries: %v", err)}
	}
	gl := map[string]*posted{}
	for rows.Next() {
		var id string
		var released bool
		var amount int64
		if err := rows.Scan(&id, &released, &amount); err != nil {
			return []string{fmt.Sprintf("read the GL's hold entries: %v", err)}
		}
		p := gl[id]
		if p == nil {
			p = &posted{}
			gl[id] = p
		}
		if released {
			p.released = true
		} else {
			p.placed = amount
		}
	}
	if err := rows.Err(); err != nil {
		return []string{fmt.Sprintf("read the GL's hold entries: %v", err)}
	}
	var problems []string
	known := map[string]bool{}
	for _, h := range byKey {
		known[h.id] = true
		p := gl[h.id]
		switch {
		case p == nil || p.placed != h.amount:
			problems = append(problems, fmt.Sprintf("hold %s of %d: no placement of that amount in the GL", h.id, h.amount))
		case p.released != (h.status != holdPending):
			problems = append(problems, fmt.Sprintf("hold %s is %s in the wallet, released %t in the GL", h.id, h.status, p.released))
		}
	}
	for id := range gl {
		if !known[id] {
			problems = append(problems, "GL entries for hold "+id+", which the wallet does not have")
		}
	}
	var onHold int64
	if err := c.gl.QueryRow(c.ctx, `SELECT coalesce(sum(CASE direction WHEN 'credit' THEN amount ELSE -amount END), 0)
		FROM journal_lines WHERE account_code = '2020'`).Scan(&onHold); err != nil {
		return append(problems, fmt.Sprintf("read account 2020: %v", err))
	}
	if onHold != pendingTotal {
		problems = append(problems, fmt.Sprintf("account 2020 holds %d, the pending holds total %d", onHold, pendingTotal))
	}
	return problems
}
