package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/systemtest"
)

// batchEvery makes one job in that many, past the first clients' worth, an atomic batch: a
// top-up of a user from the funding wallet (a deposit leg), a payment from that user to
// another and a fee to a third, all or none. One in overdrawnBatchEvery asks a payment past
// any user's credit line, so its second leg is refused after its first applied: the whole
// batch must leave nothing. reverseBatchEvery reverses one confirmed batch in that many, every
// leg or the payment leg alone.
const (
	batchEvery          = 10
	overdrawnBatchEvery = 4
	reverseBatchEvery   = 3
	overdrawn           = 1_000_000
)

// batchPlan is a batch job: its legs, in order.
type batchPlan struct {
	legs    []systemtest.TransferRequest
	reverse bool
	onlyLeg int // -1: reverse every leg; else the index of the one leg to reverse
}

// BatchOutcome is what a batch's client saw: the batch confirmed as ID with LegIDs (in the
// order asked), or refused (ID ""); and its reversal, when one was asked and confirmed.
type BatchOutcome struct {
	ID         string
	Legs       int
	Amount     int64 // the legs' total
	Refused    bool
	ReversalID string
	Reversed   []string // the legs the reversal names
}

func newBatchPlan(rng *rand.Rand, users []string) *batchPlan {
	pick := func(not ...string) string {
		for {
			u := users[rng.IntN(len(users))]
			if !slices.Contains(not, u) {
				return u
			}
		}
	}
	payer := pick()
	payee := pick(payer)
	fees := pick(payer, payee)
	p := &batchPlan{legs: []systemtest.TransferRequest{
		{FromWalletID: fundingWallet, ToWalletID: payer, Amount: int64(1 + rng.IntN(50)), Currency: currency},
		{FromWalletID: payer, ToWalletID: payee, Amount: int64(1 + rng.IntN(100)), Currency: currency},
		{FromWalletID: payer, ToWalletID: fees, Amount: int64(1 + rng.IntN(5)), Currency: currency},
	}, onlyLeg: -1}
	if rng.IntN(overdrawnBatchEvery) == 0 {
		p.legs[1].Amount = overdrawn
	}
	if rng.IntN(reverseBatchEvery) == 0 {
		p.reverse = true
		if rng.IntN(2) == 0 {
			p.onlyLeg = 1
		}
	}
	return p
}

// batchAnswer is the part of a batch's (or batch reversal's) 201 the load reads.
type batchAnswer struct {
	ID        string `json:"id"`
	Transfers []struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	} `json:"transfers"`
	Reversals []struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	} `json:"reversals"`
}

// sendBatch runs a batch job: the batch, then, if planned and the batch was confirmed, its
// reversal under its own key; each retried with its key until it gets a definitive answer.
func (g *loadGen) sendBatch(ctx context.Context, client int, j job) {
	p := j.batch
	legs := make([]map[string]any, len(p.legs))
	var total int64
	for i, l := range p.legs {
		legs[i] = map[string]any{"from_wallet_id": l.FromWalletID, "to_wallet_id": l.ToWalletID, "amount": l.Amount, "currency": l.Currency}
		total += l.Amount
	}
	body := map[string]any{"transfers": legs, "metadata": map[string]string{"load": "chaos"}}
	resp, ok := g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
		return c.Do(ctx, http.MethodPost, "/v1/transfer-batches", body, map[string]string{"Idempotency-Key": j.key})
	}, answered)
	if !ok {
		return
	}
	var batch batchAnswer
	out := &BatchOutcome{Legs: len(p.legs), Amount: total}
	g.mu.Lock()
	g.res.Batches[j.key] = out
	if resp.Status != http.StatusCreated || json.Unmarshal(resp.Body, &batch) != nil || len(batch.Transfers) != len(p.legs) {
		out.Refused = true
		g.res.Refused++ // a leg past a limit: nothing written
		g.mu.Unlock()
		return
	}
	out.ID = batch.ID
	g.res.Confirmed[j.key], g.res.Amounts[j.key] = batch.ID, total
	g.mu.Unlock()
	if !p.reverse {
		return
	}
	chosen, amount := []string{}, int64(0)
	for i, leg := range batch.Transfers {
		if p.onlyLeg < 0 || p.onlyLeg == i {
			chosen, amount = append(chosen, leg.ID), amount+leg.Amount
		}
	}
	reverseKey := j.key + "-reverse"
	resp, ok = g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
		return c.Do(ctx, http.MethodPost, "/v1/transfer-batches/"+batch.ID+"/reversals",
			map[string]any{"transfers": chosen}, map[string]string{"Idempotency-Key": reverseKey})
	}, answered)
	if !ok {
		return
	}
	var reversal batchAnswer
	g.mu.Lock()
	defer g.mu.Unlock()
	if resp.Status != http.StatusCreated || json.Unmarshal(resp.Body, &reversal) != nil {
		g.res.Refused++ // a receiver spent it: no force for batches
		return
	}
	out.ReversalID, out.Reversed = reversal.ID, chosen
	g.res.Confirmed[reverseKey], g.res.Amounts[reverseKey] = reversal.ID, amount
}

// batchesAllOrNothing checks the batches of the load: each confirmed batch has every leg it
// asked for in the wallet and is one GL entry whose lines are tagged with exactly its legs;
// each refused batch left nothing under its key; each confirmed batch reversal reverses the legs
// its client named, in the wallet and as one GL entry reversing the batch's entry.
func (c *checker) batchesAllOrNothing(load LoadResult, counts *Counts) {
	const name = "every batch is all its legs or nothing, one GL entry tagged with its legs, reversals likewise"
	walletLegs, err := c.groups(c.wallet, `SELECT coalesce(batch_id, batch_reversal_id)::text, id::text FROM transfers
		WHERE batch_id IS NOT NULL OR batch_reversal_id IS NOT NULL`)
	if err != nil {
		c.failed(name, err)
		return
	}
	reversedLegs, err := c.groups(c.wallet, `SELECT batch_reversal_id::text, reverses_transfer_id::text FROM transfers WHERE batch_reversal_id IS NOT NULL`)
	if err != nil {
		c.failed(name, err)
		return
	}
	glTags, err := c.groups(c.gl, `SELECT DISTINCT e.transfer_id, l.transfer_id FROM journal_entries e
		JOIN journal_lines l ON l.entry_id = e.id WHERE e.event_type IN ('TransferBatchCompleted.v1', 'TransferBatchReversed.v1')`)
	if err != nil {
		c.failed(name, err)
		return
	}
	glReverses, err := c.pairs(c.gl, `SELECT r.transfer_id, o.transfer_id FROM journal_entries r
		JOIN journal_entries o ON o.id = r.reverses_entry_id WHERE r.event_type = 'TransferBatchReversed.v1'`)
	if err != nil {
		c.failed(name, err)
		return
	}
	var keptRefused int
	refusedKeys := []string{}
	for key, b := range load.Batches {
		if b.Refused {
			refusedKeys = append(refusedKeys, key)
		}
	}
	if err := c.wallet.QueryRow(c.ctx, `SELECT (SELECT count(*) FROM transfer_batches WHERE idempotency_key = ANY($1))
		+ (SELECT count(*) FROM transfers WHERE idempotency_key = ANY($1))`, refusedKeys).Scan(&keptRefused); err != nil {
		c.failed(name, err)
		return
	}
	var problems []string
	if keptRefused > 0 {
		problems = append(problems, fmt.Sprintf("%d rows written under the keys of refused batches", keptRefused))
	}
	var confirmed, reversed int
	for key, b := range load.Batches {
		if b.ID == "" {
			continue
		}
		confirmed++
		legs := walletLegs[b.ID]
		if len(legs) != b.Legs {
			problems = append(problems, fmt.Sprintf("batch %s (key %s): %d legs in the wallet, %d asked", b.ID, key, len(legs), b.Legs))
		}
		if !sameSet(legs, glTags[b.ID]) {
			problems = append(problems, fmt.Sprintf("batch %s: legs %v in the wallet, lines tagged %v in the GL", b.ID, legs, glTags[b.ID]))
		}
		if b.ReversalID == "" {
			continue
		}
		reversed++
		if !sameSet(reversedLegs[b.ReversalID], b.Reversed) {
			problems = append(problems, fmt.Sprintf("batch reversal %s reverses %v in the wallet, its client named %v", b.ReversalID, reversedLegs[b.ReversalID], b.Reversed))
		}
		if len(walletLegs[b.ReversalID]) != len(b.Reversed) || !sameSet(walletLegs[b.ReversalID], glTags[b.ReversalID]) {
			problems = append(problems, fmt.Sprintf("batch reversal %s: %v in the wallet, lines tagged %v in the GL", b.ReversalID, walletLegs[b.ReversalID], glTags[b.ReversalID]))
		}
		if glReverses[b.ReversalID] != b.ID {
			problems = append(problems, fmt.Sprintf("batch reversal %s's entry reverses %q, not batch %s's", b.ReversalID, glReverses[b.ReversalID], b.ID))
		}
	}
	counts.Batches = confirmed
	c.add(name, len(problems) == 0, "%d batches confirmed, %d refused, %d batch reversals%s", confirmed, len(refusedKeys), reversed, list(problems))
}

// groups reads a two-column query of ids into a map from the first to every second one.
func (c *checker) groups(db *pgxpool.Pool, query string) (map[string][]string, error) {
	rows, err := db.Query(c.ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	m := map[string][]string{}
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, fmt.Errorf("scan group: %w", err)
		}
		m[a] = append(m[a], b)
	}
	return m, rows.Err()
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
