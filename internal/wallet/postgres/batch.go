package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/wallet/postgres/walletdb"
)

// Group commit: one transaction, and so one commit and one WAL flush, serves many transfers.
// A transaction per request caps the API far below what PostgreSQL sustains, because every
// request waits for its own flush; with batching, requests that arrive while a batch commits
// wait together for the next one.

// BatchConfig sizes the batcher. The zero value means the defaults.
type BatchConfig struct {
	// MaxSize is the most transfer requests one transaction takes.
	MaxSize int
	// Workers is how many batches may be committing at once. A batch starts as soon as a
	// worker is free, with whatever requests queued meanwhile: there is no timer to wait for.
	Workers int
}

// The batcher's defaults.
const (
	DefaultBatchMaxSize = 256
	DefaultBatchWorkers = 2
)

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxSize <= 0 {
		c.MaxSize = DefaultBatchMaxSize
	}
	if c.Workers <= 0 {
		c.Workers = DefaultBatchWorkers
	}
	return c
}

// BatchStats counts the batcher's work since the store was made.
type BatchStats struct {
	Running   bool  // Run is taking requests
	Queued    int   // requests waiting for a batch
	Batches   int64 // transactions the batcher committed
	Requests  int64 // requests those transactions answered: created, replayed or refused
	Created   int64 // transfers those transactions wrote
	Fallbacks int64 // batches rolled back and run again one request at a time
	// Rewritten counts batches first tried without looking their keys up (the optimistic
	// path), rolled back because one request was a replay or was refused, and written again
	// with the lookup.
	Rewritten int64
}

type batcher struct {
	cfg BatchConfig
	log zerolog.Logger

	mu      sync.Mutex
	running bool
	queue   []*pendingTransfer
	wake    chan struct{} // one token: the queue may have grown

	batches, requests, created, fallbacks, rewritten atomic.Int64
	// lookupFirst: the last batch held a replay or a refusal, so the next one looks its keys
	// up first instead of trying the optimistic path.
	lookupFirst atomic.Bool
}

func newBatcher(cfg BatchConfig) *batcher {
	return &batcher{cfg: cfg.withDefaults(), log: zerolog.Nop(), wake: make(chan struct{}, 1)}
}

// WithBatching sets how Run batches transfer requests, and the logger of its fallbacks. Call it
// before Run.
func (s *Store) WithBatching(cfg BatchConfig, log zerolog.Logger) *Store {
	s.batch.cfg, s.batch.log = cfg.withDefaults(), log
	return s
}

// BatchStats reports how many transactions the batcher committed and for how many requests.
func (s *Store) BatchStats() BatchStats {
	b := s.batch
	b.mu.Lock()
	running, queued := b.running, len(b.queue)
	b.mu.Unlock()
	return BatchStats{
		Running: running, Queued: queued,
		Batches: b.batches.Load(), Requests: b.requests.Load(),
		Created: b.created.Load(), Fallbacks: b.fallbacks.Load(), Rewritten: b.rewritten.Load(),
	}
}

// Run batches CreateTransfer requests until ctx is cancelled: each batch is one transaction.
// Without Run, each request has a transaction of its own. On cancellation Run stops taking
// requests (later ones get their own transaction), commits what is queued and returns once
// every request it took has its answer.
func (s *Store) Run(ctx context.Context) error {
	b := s.batch
	if err := b.start(); err != nil {
		return err
	}
	// Batches finish even after ctx is cancelled: their callers are waiting for the answer.
	batchCtx := context.WithoutCancel(ctx)
	slots := make(chan struct{}, b.cfg.Workers)
	var wg sync.WaitGroup
	launch := func(batch []*pendingTransfer) {
		wg.Go(func() {
			defer func() { <-slots }()
			s.runBatch(batchCtx, batch)
		})
	}
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return s.drain(slots, launch, &wg)
		}
		batch := b.next(ctx)
		if batch == nil {
			<-slots
			return s.drain(slots, launch, &wg)
		}
		launch(batch)
	}
}

// drain answers every request queued before the batcher stopped taking new ones.
func (s *Store) drain(slots chan struct{}, launch func([]*pendingTransfer), wg *sync.WaitGroup) error {
	b := s.batch
	b.stop()
	for {
		batch := b.take()
		if batch == nil {
			break
		}
		slots <- struct{}{}
		launch(batch)
	}
	wg.Wait()
	return nil
}

func (b *batcher) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return errors.New("run transfer batcher: already running")
	}
	b.running = true
	return nil
}

func (b *batcher) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = false
}

// enqueue hands p to the batcher; false means no batcher runs and the caller writes p itself.
func (b *batcher) enqueue(p *pendingTransfer) bool {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// next waits for queued requests and takes up to MaxSize of them; nil when ctx ends first.
func (b *batcher) next(ctx context.Context) []*pendingTransfer {
	for {
		if batch := b.take(); batch != nil {
			return batch
		}
		select {
		case <-b.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// take removes up to MaxSize requests from the queue, oldest first; nil when it is empty.
func (b *batcher) take() []*pendingTransfer {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.cfg.MaxSize)
	if n == 0 {
		return nil
	}
	batch := b.queue[:n:n]
	if n == len(b.queue) {
		b.queue = nil
	} else {
		b.queue = slices.Clone(b.queue[n:])
	}
	return batch
}

// errKeyTaken rolls a batch back: a concurrent transaction committed one of its keys after the
// batch looked them up. Run one by one, those requests become replays or refusals.
var errKeyTaken = errors.New("an idempotency key of the batch was taken meanwhile")

// errNeedLookup rolls back a batch written on the optimistic path (its keys not looked up):
// one of its requests was refused or its key was taken, and either may be a replay, whose
// answer only the lookup gives. The batch is written again with the lookup.
var errNeedLookup = errors.New("a request of the batch may be a replay")

// errBalanceOverflow rolls a batch back whose running balance would leave int64; one by one,
// only the request that overflows fails.
var errBalanceOverflow = errors.New("a balance of the batch would overflow")

// batchOutcome is one request's answer from a batch; retry asks for a transaction of its own.
type batchOutcome struct {
	transferResult
	retry bool
}

// runBatch commits batch in one transaction and answers every request of it. Whatever goes
// wrong with the batch as a whole (a key taken meanwhile, a constraint, a lost connection), it
// is rolled back and each request runs alone, so one request can never fail its neighbours.
func (s *Store) runBatch(ctx context.Context, batch []*pendingTransfer) {
	b := s.batch
	live := make([]*pendingTransfer, 0, len(batch))
	for _, p := range batch {
		if !p.abandoned.Load() {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	outcomes, err := s.commitBatch(ctx, live)
	if err != nil {
		b.fallbacks.Add(1)
		level := zerolog.WarnLevel
		if errors.Is(err, errKeyTaken) {
			level = zerolog.DebugLevel
		}
		b.log.WithLevel(level).Err(err).Int("requests", len(live)).
			Msg("transfer batch rolled back; running its requests one by one")
		for _, p := range live {
			var r transferResult
			r.transfer, r.replayed, r.err = s.createOne(ctx, p)
			p.done <- r
		}
		return
	}
	b.batches.Add(1)
	b.requests.Add(int64(len(live)))
	var retries []*pendingTransfer
	for i, p := range live {
		if outcomes[i].retry {
			retries = append(retries, p)
			continue
		}
		if outcomes[i].err == nil && !outcomes[i].replayed {
			b.created.Add(1)
		}
		p.done <- outcomes[i].transferResult
	}
	for _, p := range retries {
		var r transferResult
		r.transfer, r.replayed, r.err = s.createOne(ctx, p)
		p.done <- r
	}
}

// commitBatch writes batch in one transaction and returns each request's answer. Most batches
// are new transfers only, so a batch first skips looking its keys up (one statement less on
// the path every request waits for); if a request turns out to be refused or its key taken,
// that transaction is rolled back and the batch written again with the lookup, which also
// serves the next batch (replays tend to come together, after an outage).
func (s *Store) commitBatch(ctx context.Context, batch []*pendingTransfer) ([]batchOutcome, error) {
	b := s.batch
	write := func(lookup bool) ([]batchOutcome, error) {
		var outcomes []batchOutcome
		err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			outcomes, err = s.writeBatch(ctx, tx, batch, lookup)
			return err
		})
		return outcomes, err
	}
	if !b.lookupFirst.Load() {
		outcomes, err := write(false)
		if !errors.Is(err, errNeedLookup) {
			return outcomes, err
		}
		b.rewritten.Add(1)
	}
	outcomes, err := write(true)
	if err == nil {
		b.lookupFirst.Store(slices.ContainsFunc(outcomes, func(o batchOutcome) bool { return o.replayed || o.err != nil }))
	}
	return outcomes, err
}

// writeBatch writes the transfers of batch in tx with a fixed number of statements, whatever
// its size, and returns each request's answer (valid once tx commits). Without lookup, the
// keys are taken to be new and any refusal or taken key fails the batch with errNeedLookup.
// An error means tx must be rolled back.
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, batch []*pendingTransfer, lookup bool) ([]batchOutcome, error) {
	q := s.queries.WithTx(tx)
	out := make([]batchOutcome, len(batch))

	// (a) The first request of each key leads; a later one with the same key gets the answer of
	// whatever holds the key when the batch commits.
	leaders := make(map[string]int, len(batch))
	keys := make([]string, 0, len(batch))
	var followers []int
	for i, p := range batch {
		if _, ok := leaders[p.req.IdempotencyKey]; ok {
			followers = append(followers, i)
			continue
		}
		leaders[p.req.IdempotencyKey] = i
		keys = append(keys, p.req.IdempotencyKey)
	}

	// (b) Keys used before: replays or refusals.
	owners := make(map[string]keyOwner, len(keys))
	var used []walletdb.GetTransfersByIdempotencyKeysRow
	if lookup {
		var err error
		if used, err = q.GetTransfersByIdempotencyKeys(ctx, keys); err != nil {
			return nil, fmt.Errorf("load transfers by idempotency key: %w", err)
		}
	}
	for _, row := range used {
		owners[row.Transfer.IdempotencyKey] = keyOwner{
			transfer: toTransfer(row.Transfer, row.OutboxStatus), hash: row.Transfer.RequestHash,
		}
	}
	var fresh []int // leaders whose key is new, in arrival order
	walletIDs := make([]string, 0, 2*len(keys))
	for _, key := range keys {
		i := leaders[key]
		if owner, ok := owners[key]; ok {
			out[i].transfer, out[i].err = answerFromOwner(batch[i].req, batch[i].hash, owner)
			out[i].replayed = out[i].err == nil
			continue
		}
		fresh = append(fresh, i)
		walletIDs = append(walletIDs, batch[i].req.FromWalletID, batch[i].req.ToWalletID)
	}

	if len(fresh) > 0 {
		created, err := s.writeFresh(ctx, tx, batch, fresh, walletIDs, out, lookup)
		if err != nil {
			return nil, err
		}
		for key, owner := range created {
			owners[key] = owner
		}
	}

	for _, i := range followers {
		p := batch[i]
		owner, ok := owners[p.req.IdempotencyKey]
		if !ok {
			// The leader was refused (its key stays free) or left: this request may differ
			// from it, so it is decided on its own, after this batch.
			out[i].retry = true
			continue
		}
		out[i].transfer, out[i].err = answerFromOwner(p.req, p.hash, owner)
		out[i].replayed = out[i].err == nil
	}
	return out, nil
}

// writeFresh checks and writes the requests of batch at the indexes fresh, whose keys were
// not used before, setting their answers in out; it returns the owners of the keys it wrote.
func (s *Store) writeFresh(ctx context.Context, tx pgx.Tx, batch []*pendingTransfer, fresh []int,
	walletIDs []string, out []batchOutcome, lookedUp bool) (map[string]keyOwner, error) {
	q := s.queries.WithTx(tx)

	// (c) Every wallet of the batch, locked in one statement in id order, so that batches (and
	// single transfers, which lock the same way) cannot deadlock each other.
	slices.Sort(walletIDs)
	walletIDs = slices.Compact(walletIDs)
	locked, err := q.LockWallets(ctx, walletIDs)
	if err != nil {
		return nil, fmt.Errorf("lock wallets: %w", err)
	}
	wallets := make(map[string]*walletdb.LockWalletsRow, len(locked))
	for i := range locked {
		wallets[locked[i].ID] = &locked[i]
	}

	// (d) The rules, in arrival order, against running balances: a refused request fails alone.
	var accepted []int
	for _, i := range fresh {
		req := batch[i].req
		from, to := wallets[req.FromWalletID], wallets[req.ToWalletID]
		if err := checkTransfer(req, from, to); err != nil {
			if !lookedUp {
				return nil, errNeedLookup // a replay is answered, not refused
			}
			out[i].err = err
			continue
		}
		if to.Balance > math.MaxInt64-req.Amount || from.Balance < math.MinInt64+req.Amount {
			return nil, errBalanceOverflow
		}
		from.Balance -= req.Amount
		to.Balance += req.Amount
		accepted = append(accepted, i)
	}
	if len(accepted) == 0 {
		return nil, nil
	}

	// (e) The transfers in one statement, claiming their keys in key order: two batches that
	// share keys claim them in the same order and cannot deadlock on them.
	slices.SortFunc(accepted, func(a, b int) int {
		return strings.Compare(batch[a].req.IdempotencyKey, batch[b].req.IdempotencyKey)
	})
	n := len(accepted)
	ins := walletdb.InsertTransfersParams{
		Ids: make([]uuid.UUID, n), IdempotencyKeys: make([]string, n), RequestHashes: make([][]byte, n),
		FromWalletIds: make([]string, n), ToWalletIds: make([]string, n), Amounts: make([]int64, n),
		Currencies: make([]string, n), EventIds: make([]uuid.UUID, n),
	}
	deltas := walletdb.AddToBalancesParams{Ids: make([]string, 0, 2*n), Deltas: make([]int64, 0, 2*n)}
	for j, i := range accepted {
		p := batch[i]
		ins.Ids[j], ins.IdempotencyKeys[j], ins.RequestHashes[j] = p.transferID, p.req.IdempotencyKey, p.hash
		ins.FromWalletIds[j], ins.ToWalletIds[j] = p.req.FromWalletID, p.req.ToWalletID
		ins.Amounts[j], ins.Currencies[j], ins.EventIds[j] = p.req.Amount, p.req.Currency, p.eventID
		deltas.Ids = append(deltas.Ids, p.req.FromWalletID, p.req.ToWalletID)
		deltas.Deltas = append(deltas.Deltas, -p.req.Amount, p.req.Amount)
	}
	rows, err := q.InsertTransfers(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("insert %d transfers: %w", n, err)
	}
	if len(rows) != n {
		if !lookedUp {
			return nil, errNeedLookup
		}
		return nil, errKeyTaken
	}

	// (f) Every balance in one statement, the deltas summed per wallet.
	touched := slices.Clone(deltas.Ids)
	slices.Sort(touched)
	touched = slices.Compact(touched)
	changed, err := q.AddToBalances(ctx, deltas)
	if err != nil {
		return nil, fmt.Errorf("update balances: %w", err)
	}
	if changed != int64(len(touched)) {
		return nil, fmt.Errorf("update balances: %d wallets changed, want %d", changed, len(touched))
	}

	// (g) Every event in one statement, in the transaction of its transfer.
	evs := make([]events.Event, len(rows))
	for j, row := range rows {
		evs[j] = transferCompleted(row)
	}
	status, err := s.outbox.AddBatch(ctx, tx, evs)
	if err != nil {
		return nil, err
	}
	created := make(map[string]keyOwner, n)
	byID := make(map[uuid.UUID]int, n)
	for _, i := range accepted {
		byID[batch[i].transferID] = i
	}
	for _, row := range rows {
		i, ok := byID[row.ID]
		if !ok {
			return nil, fmt.Errorf("insert transfers: unexpected transfer %s", row.ID)
		}
		out[i].transfer = toTransfer(row, status)
		created[row.IdempotencyKey] = keyOwner{transfer: out[i].transfer, hash: row.RequestHash}
	}
	return created, nil
}
