package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"walletgl/internal/database"
	"walletgl/internal/events/outbox"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// The batcher's write function for transfers: a batch is one transaction with a fixed number of
// statements whatever its size (see writeBatch).

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

// batchCounters are the counts of BatchStats that the write function keeps.
type batchCounters struct {
	batches, requests, created, fallbacks, rewritten atomic.Int64
}

// BatchStats reports how many transactions the batcher committed and for how many requests.
func (s *Store) BatchStats() BatchStats {
	running, queued := s.batch.status()
	c := &s.counts
	return BatchStats{
		Running: running, Queued: queued,
		Batches: c.batches.Load(), Requests: c.requests.Load(),
		Created: c.created.Load(), Fallbacks: c.fallbacks.Load(), Rewritten: c.rewritten.Load(),
	}
}

// errKeyTaken rolls a batch back: a concurrent transaction committed one of its keys after the
// batch looked them up. Run one by one, those requests become replays or refusals.
var errKeyTaken = errors.New("an idempotency key of the batch was taken meanwhile")

// errNeedLookup rolls back a batch written on the optimistic path (its keys not looked up):
// one of its requests was refused or its key was taken, and either may be a replay, whose
// answer only the lookup gives. The batch is written again with the lookup.
var errNeedLookup = errors.New("a request of the batch may be a replay")

// batchOutcome is one request's answer from a batch; retry asks for a transaction of its own.
type batchOutcome struct {
	transferResult
	err   error
	retry bool
}

// writeTransfers is the batcher's write function: it commits batch in one transaction and
// answers every request of it. Whatever goes wrong with the batch as a whole (a key taken
// meanwhile, a constraint, a lost connection), it is rolled back and each request runs alone,
// so one request can never fail its neighbours.
func (s *Store) writeTransfers(ctx context.Context, batch []*pendingTransfer, answer func(int, transferResult, error)) {
	outcomes, err := s.commitBatch(ctx, batch)
	noteBatch(batch, err != nil)
	if err != nil {
		s.counts.fallbacks.Add(1)
		level := zerolog.WarnLevel
		if errors.Is(err, errKeyTaken) {
			level = zerolog.DebugLevel
		}
		s.log.WithLevel(level).Err(err).Int("requests", len(batch)).
			Msg("transfer batch rolled back; running its requests one by one")
		for i, p := range batch {
			r, err := s.createOne(ctx, p)
			answer(i, r, err)
		}
		return
	}
	s.counts.batches.Add(1)
	s.counts.requests.Add(int64(len(batch)))
	s.metrics.Batch(len(batch))
	var retries []int
	for i, o := range outcomes {
		if o.retry {
			retries = append(retries, i)
			continue
		}
		if o.err == nil && !o.replayed {
			s.counts.created.Add(1)
		}
		answer(i, o.transferResult, o.err)
	}
	for _, i := range retries {
		r, err := s.createOne(ctx, batch[i])
		answer(i, r, err)
	}
}

// commitBatch writes batch in one transaction and returns each request's answer. Most batches
// are new transfers only, so a batch first skips looking its keys up (one statement less on
// the path every request waits for); if a request turns out to be refused or its key taken,
// that transaction is rolled back and the batch written again with the lookup, which also
// serves the next batch (replays tend to come together, after an outage). A batch rolled back
// by a deadlock or a serialization failure is written again as it is: run one by one instead,
// its requests would cost a transaction each for a failure none of them caused.
func (s *Store) commitBatch(ctx context.Context, batch []*pendingTransfer) ([]batchOutcome, error) {
	write := func(lookup bool) ([]batchOutcome, error) {
		return database.RetrySerialization(ctx, database.DefaultSerializationAttempts, func() ([]batchOutcome, error) {
			return database.WithTxV(ctx, s.pool, func(tx pgx.Tx) ([]batchOutcome, error) {
				return s.writeBatch(ctx, tx, batch, lookup)
			})
		})
	}
	if !s.lookupFirst.Load() {
		outcomes, err := write(false)
		if !errors.Is(err, errNeedLookup) {
			return outcomes, err
		}
		s.counts.rewritten.Add(1)
	}
	outcomes, err := write(true)
	if err == nil {
		s.lookupFirst.Store(slices.ContainsFunc(outcomes, func(o batchOutcome) bool { return o.replayed || o.err != nil || o.retry }))
	}
	return outcomes, err
}

// batchTx is one attempt at writing a batch in one transaction: its requests, their answers
// so far (valid once the transaction commits), and whether their keys were looked up first.
type batchTx struct {
	eventType string // the version of TransferCompleted to write (Options.TransferEventType)
	tx        pgx.Tx
	q         *walletdb.Queries
	outbox    *outbox.Outbox
	batch     []*pendingTransfer
	out       []batchOutcome
	lookup    bool
}

// writeBatch writes the transfers of batch in tx with a fixed number of statements, whatever
// its size, and returns each request's answer (valid once tx commits). Without lookup, the
// keys are taken to be new and any refusal or taken key fails the batch with errNeedLookup.
// An error means tx must be rolled back.
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, batch []*pendingTransfer, lookup bool) ([]batchOutcome, error) {
	w := &batchTx{
		eventType: s.eventType, tx: tx, q: s.queries.WithTx(tx), outbox: s.outbox,
		batch: batch, out: make([]batchOutcome, len(batch)), lookup: lookup,
	}
	keys := groupByKey(batch)
	owners, refusals, err := w.keyOwners(ctx, keys.keys)
	if err != nil {
		return nil, err
	}
	if fresh := w.answerUsedKeys(keys, owners, refusals); len(fresh) > 0 {
		created, err := w.writeFresh(ctx, fresh)
		if err != nil {
			return nil, err
		}
		maps.Copy(owners, created)
	}
	w.answerFollowers(keys.followers, owners)
	return w.out, nil
}

// batchKeys sorts a batch's requests by key: the first request of each key leads; a later one
// with the same key follows, and gets the answer of whatever holds the key when the batch
// commits.
type batchKeys struct {
	leaders   map[claimedKey]int // key → index of its first request
	keys      []claimedKey       // the leaders' keys, in arrival order
	followers []int
}

// groupByKey finds the leader of each key of batch and the requests that follow one.
func groupByKey(batch []*pendingTransfer) batchKeys {
	k := batchKeys{leaders: make(map[claimedKey]int, len(batch)), keys: make([]claimedKey, 0, len(batch))}
	for i, p := range batch {
		if _, ok := k.leaders[p.key()]; ok {
			k.followers = append(k.followers, i)
			continue
		}
		k.leaders[p.key()] = i
		k.keys = append(k.keys, p.key())
	}
	return k
}

// keyOwners looks up the keys used before: their requests are replays or refusals, of a
// transfer that holds the key or of a refusal kept under it. Without the lookup, no key is
// known to be used.
func (w *batchTx) keyOwners(ctx context.Context, keys []claimedKey) (map[claimedKey]keyOwner, map[claimedKey]walletdb.Refusal, error) {
	owners := make(map[claimedKey]keyOwner, len(keys))
	refusals := map[claimedKey]walletdb.Refusal{}
	if !w.lookup {
		return owners, refusals, nil
	}
	used, err := w.q.GetTransfersByIdempotencyKeys(ctx, walletdb.GetTransfersByIdempotencyKeysParams(keyColumns(keys)))
	if err != nil {
		return nil, nil, fmt.Errorf("load transfers by idempotency key: %w", err)
	}
	for _, row := range used {
		owners[claimedKey{owner: row.Transfer.IdempotencyOwner, key: row.Transfer.IdempotencyKey}] = keyOwner{
			transfer: toTransfer(row.Transfer, row.OutboxStatus), hash: row.Transfer.RequestHash,
		}
	}
	refused, err := w.q.GetRefusals(ctx, walletdb.GetRefusalsParams(keyColumns(keys)))
	if err != nil {
		return nil, nil, fmt.Errorf("load refusals: %w", err)
	}
	for _, r := range refused {
		refusals[claimedKey{owner: r.IdempotencyOwner, key: r.IdempotencyKey}] = r
	}
	return owners, refusals, nil
}

// keyColumns are keys as the columns of a statement's parameters.
func keyColumns(keys []claimedKey) struct {
	IdempotencyOwners []string
	IdempotencyKeys   []string
} {
	cols := struct {
		IdempotencyOwners []string
		IdempotencyKeys   []string
	}{make([]string, len(keys)), make([]string, len(keys))}
	for i, k := range keys {
		cols.IdempotencyOwners[i], cols.IdempotencyKeys[i] = k.owner, k.key
	}
	return cols
}

// answerUsedKeys answers the leaders whose key has an owner or a refusal, and returns the
// others (those whose key is new) in arrival order.
func (w *batchTx) answerUsedKeys(k batchKeys, owners map[claimedKey]keyOwner, refusals map[claimedKey]walletdb.Refusal) (fresh []int) {
	for _, key := range k.keys {
		i := k.leaders[key]
		if owner, ok := owners[key]; ok {
			w.answerFromOwner(i, owner)
			continue
		}
		if r, ok := refusals[key]; ok {
			w.out[i].err = replayRefusal(key.key, w.batch[i].hash, r)
			continue
		}
		fresh = append(fresh, i)
	}
	return fresh
}

// answerFollowers answers the requests that follow a leader, once every key of the batch has
// its owner.
func (w *batchTx) answerFollowers(followers []int, owners map[claimedKey]keyOwner) {
	for _, i := range followers {
		owner, ok := owners[w.batch[i].key()]
		if !ok {
			// The leader was refused (its key stays free) or left: this request may differ
			// from it, so it is decided on its own, after this batch.
			w.out[i].retry = true
			continue
		}
		w.answerFromOwner(i, owner)
	}
}

func (w *batchTx) answerFromOwner(i int, owner keyOwner) {
	p := w.batch[i]
	w.out[i].transfer, w.out[i].err = answerFromOwner(p, owner)
	w.out[i].replayed = w.out[i].err == nil
}

// writeFresh checks and writes the requests at the indexes fresh, whose keys were not used
// before, setting their answers; it returns the owners of the keys it wrote.
func (w *batchTx) writeFresh(ctx context.Context, fresh []int) (map[claimedKey]keyOwner, error) {
	wallets, err := w.lockWallets(ctx, fresh)
	if err != nil {
		return nil, err
	}
	accepted, err := w.applyRules(fresh, wallets)
	if err != nil || len(accepted) == 0 {
		return nil, err
	}
	// Claimed in key order: two batches that share keys claim them in the same order and
	// cannot deadlock on them.
	slices.SortFunc(accepted, func(a, b int) int {
		ka, kb := w.batch[a].key(), w.batch[b].key()
		return cmp.Or(strings.Compare(ka.owner, kb.owner), strings.Compare(ka.key, kb.key))
	})
	rows, err := w.insertTransfers(ctx, accepted)
	if err != nil {
		return nil, err
	}
	if err := w.checkNoRefusals(ctx, accepted); err != nil {
		return nil, err
	}
	if err := w.addToBalances(ctx, accepted); err != nil {
		return nil, err
	}
	return w.addEvents(ctx, accepted, rows, wallets)
}

// lockWallets locks every wallet of the fresh requests in one statement in id order, so that
// batches (and single transfers, which lock the same way) cannot deadlock each other. It
// returns them by id.
func (w *batchTx) lockWallets(ctx context.Context, fresh []int) (map[string]*wallet.Wallet, error) {
	ids := make([]string, 0, 2*len(fresh))
	for _, i := range fresh {
		ids = append(ids, w.batch[i].req.FromWalletID, w.batch[i].req.ToWalletID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	locked, err := w.q.LockWallets(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("lock wallets: %w", err)
	}
	return lockedWallets(locked), nil
}

// checkNoRefusals takes the shared locks of the keys the batch claimed, then fails the batch
// when a refusal holds one: a request refused, and recorded under the key's exclusive lock,
// after the batch looked its keys up. Run one by one, the batch's requests find the refusal.
func (w *batchTx) checkNoRefusals(ctx context.Context, accepted []int) error {
	keys := make([]claimedKey, len(accepted))
	for j, i := range accepted {
		keys[j] = w.batch[i].key()
	}
	cols := keyColumns(keys)
	if err := w.q.LockKeysShared(ctx, walletdb.LockKeysSharedParams{
		KeySpace: spaceTransfer, IdempotencyOwners: cols.IdempotencyOwners, IdempotencyKeys: cols.IdempotencyKeys,
	}); err != nil {
		return fmt.Errorf("lock idempotency keys: %w", err)
	}
	refused, err := w.q.GetRefusals(ctx, walletdb.GetRefusalsParams(cols))
	if err != nil {
		return fmt.Errorf("load refusals: %w", err)
	}
	if len(refused) > 0 {
		if !w.lookup {
			return errNeedLookup
		}
		return errKeyTaken
	}
	return nil
}

// applyRules checks the fresh requests in arrival order against the running balances of the
// locked wallets, which it moves: a refused request fails alone. A refusal that is kept under
// its key (wallet.Kept) is decided again in a transaction of its own, which records it. It
// returns those accepted.
func (w *batchTx) applyRules(fresh []int, wallets map[string]*wallet.Wallet) (accepted []int, err error) {
	for _, i := range fresh {
		p := w.batch[i]
		req := p.req
		from, to := wallets[req.FromWalletID], wallets[req.ToWalletID]
		err := wallet.CheckDebit(p.actor, "from_wallet_id", from)
		if err == nil {
			err = wallet.CheckTransfer(req, from, to)
		}
		if err != nil {
			switch {
			case !w.lookup:
				return nil, errNeedLookup // a replay is answered, not refused
			case wallet.Kept(err):
				w.out[i].retry = true
			default:
				w.out[i].err = err
			}
			continue
		}
		wallet.Move(from, to, req.Amount)
		accepted = append(accepted, i)
	}
	return accepted, nil
}

// insertTransfers writes the accepted transfers in one statement. A key another transaction
// took meanwhile leaves its row out, and fails the batch.
func (w *batchTx) insertTransfers(ctx context.Context, accepted []int) ([]walletdb.Transfer, error) {
	n := len(accepted)
	ins := walletdb.InsertTransfersParams{
		Ids: make([]uuid.UUID, n), IdempotencyOwners: make([]string, n), IdempotencyKeys: make([]string, n), RequestHashes: make([][]byte, n),
		FromWalletIds: make([]string, n), ToWalletIds: make([]string, n), Amounts: make([]int64, n),
		Currencies: make([]string, n), EventIds: make([]uuid.UUID, n), CreatedByKeys: make([]uuid.UUID, n),
		TransferReferences: make([]string, n), Metadata: make([]string, n),
	}
	for j, i := range accepted {
		p := w.batch[i]
		ins.Ids[j], ins.IdempotencyKeys[j], ins.RequestHashes[j] = p.transferID, p.req.IdempotencyKey, p.hash
		ins.IdempotencyOwners[j] = p.actor.Owner
		ins.FromWalletIds[j], ins.ToWalletIds[j] = p.req.FromWalletID, p.req.ToWalletID
		ins.Amounts[j], ins.Currencies[j], ins.EventIds[j] = p.req.Amount, p.req.Currency, p.eventID
		ins.CreatedByKeys[j] = p.req.KeyID // uuid.Nil: none (stored NULL)
		ins.TransferReferences[j] = p.req.Reference
		ins.Metadata[j] = string(p.req.Metadata.JSON())
	}
	rows, err := w.q.InsertTransfers(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("insert %d transfers: %w", n, err)
	}
	if len(rows) != n {
		if !w.lookup {
			return nil, errNeedLookup
		}
		return nil, errKeyTaken
	}
	return rows, nil
}

// addToBalances moves every balance of the accepted transfers in one statement, the deltas
// summed per wallet.
func (w *batchTx) addToBalances(ctx context.Context, accepted []int) error {
	deltas := walletdb.AddToBalancesParams{
		Ids: make([]string, 0, 2*len(accepted)), Deltas: make([]int64, 0, 2*len(accepted)),
	}
	for _, i := range accepted {
		req := w.batch[i].req
		deltas.Ids = append(deltas.Ids, req.FromWalletID, req.ToWalletID)
		deltas.Deltas = append(deltas.Deltas, -req.Amount, req.Amount)
	}
	touched := slices.Clone(deltas.Ids)
	slices.Sort(touched)
	touched = slices.Compact(touched)
	changed, err := w.q.AddToBalances(ctx, deltas)
	if err != nil {
		return fmt.Errorf("update balances: %w", err)
	}
	if changed != int64(len(touched)) {
		return fmt.Errorf("update balances: %d wallets changed, want %d", changed, len(touched))
	}
	return nil
}

// addEvents writes the events of the transfers in rows in one statement, in the transaction of
// their transfers, and answers the accepted requests; it returns the owners of the keys they
// took.
func (w *batchTx) addEvents(ctx context.Context, accepted []int, rows []walletdb.Transfer, wallets map[string]*wallet.Wallet) (map[claimedKey]keyOwner, error) {
	byID := make(map[uuid.UUID]int, len(accepted))
	for _, i := range accepted {
		byID[w.batch[i].transferID] = i
	}
	evs := make([]outbox.Event, len(rows))
	for j, row := range rows {
		i, ok := byID[row.ID]
		if !ok {
			return nil, fmt.Errorf("insert transfers: unexpected transfer %s", row.ID)
		}
		evs[j] = transferCompleted(row, w.batch[i].traceParent, wallet.TransferKind(wallets[row.FromWalletID], wallets[row.ToWalletID]), w.eventType)
	}
	status, err := w.outbox.AddBatch(ctx, w.tx, evs)
	if err != nil {
		return nil, err
	}
	created := make(map[claimedKey]keyOwner, len(rows))
	for _, row := range rows {
		i := byID[row.ID]
		w.out[i].transfer = toTransfer(row, status)
		created[claimedKey{owner: row.IdempotencyOwner, key: row.IdempotencyKey}] = keyOwner{transfer: w.out[i].transfer, hash: row.RequestHash}
	}
	return created, nil
}
