package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/postgres/internal/gldb"
)

// summed is an account's balance summed over every line, without checkpoints: what every read
// must answer whatever checkpoints exist.
func (b *testBundle) summed(t *testing.T, account, currency string, asOf *time.Time) gl.Sum {
	t.Helper()
	var debits, credits int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT
		coalesce(sum(amount) FILTER (WHERE direction = 'debit'), 0), coalesce(sum(amount) FILTER (WHERE direction = 'credit'), 0)
		FROM journal_lines WHERE account_code = $1 AND currency = $2 AND ($3::timestamptz IS NULL OR posted_at <= $3)`,
		account, currency, asOf).Scan(&debits, &credits))
	if account == "1010" {
		return gl.SumOf(debits - credits)
	}
	return gl.SumOf(credits - debits)
}

// checkpoint takes a checkpoint that covers everything posted so far.
func (b *testBundle) checkpoint(t *testing.T) time.Time {
	t.Helper()
	through, taken, err := b.ledger.Checkpoint(context.Background())
	require.NoError(t, err)
	require.True(t, taken)
	return through
}

// requireReadsAgree compares every read with the sums over all lines: balances now and as of
// each time in asOf, the trial balance, and a statement's running balances page by page.
func (b *testBundle) requireReadsAgree(t *testing.T, asOf []time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, currency := range []string{"USD", "EUR"} {
		for _, account := range []string{"1010", "2010"} {
			got, err := b.ledger.AccountBalance(ctx, account, currency, nil)
			require.NoError(t, err)
			require.Equal(t, b.summed(t, account, currency, nil), got.Balance(), "%s %s now", account, currency)
			for _, at := range asOf {
				got, err := b.ledger.AccountBalance(ctx, account, currency, &at)
				require.NoError(t, err)
				require.Equal(t, b.summed(t, account, currency, &at), got.Balance(), "%s %s as of %s", account, currency, at)
			}
		}
	}
	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	var pairs int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(DISTINCT (account_code, currency)) FROM journal_lines").Scan(&pairs))
	require.Len(t, tb.Accounts, pairs)
	for _, a := range tb.Accounts {
		got := a.Debits.Sub(a.Credits) // the trial balance's rows carry no normal balance
		if a.AccountCode == "2010" {
			got = a.Credits.Sub(a.Debits)
		}
		require.Equal(t, b.summed(t, a.AccountCode, a.Currency, nil), got, "trial balance %s %s", a.AccountCode, a.Currency)
	}
	cursor, last := "", gl.SumOf(0)
	for {
		st, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", After: cursor, Limit: 3})
		require.NoError(t, err)
		for _, line := range st.Lines {
			at := line.PostedAt
			last = line.RunningBalance
			require.True(t, b.summed(t, "2010", "USD", &at).Equal(last) || sameTimeLater(t, b, line), "running balance at line %d", line.LineID)
		}
		if st.NextCursor == "" {
			break
		}
		cursor = st.NextCursor
	}
	require.Equal(t, b.summed(t, "2010", "USD", nil), last, "the statement ends at the balance")
}

// sameTimeLater reports whether another line was posted at the same time as line after it (one
// entry's two lines share their time), when the sum up to line's time is not its running balance.
func sameTimeLater(t *testing.T, b *testBundle, line gl.StatementLine) bool {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM journal_lines WHERE account_code = '2010' AND currency = 'USD' AND posted_at = $1 AND id > $2",
		line.PostedAt, line.LineID).Scan(&n))
	return n > 0
}

func TestCheckpointsLeaveEveryReadAsTheSumOfTheLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var times []time.Time
	postPhase := func(phase string, n int) {
		for i := range n {
			currency := "USD"
			if i%3 == 2 {
				currency = "EUR"
			}
			_, err := b.post(t, entry(fmt.Sprintf("%s-%d", phase, i), currency, int64(10+i)))
			require.NoError(t, err)
		}
		times = append(times, time.Now())
	}

	_, taken, err := b.ledger.Checkpoint(ctx)
	require.NoError(t, err)
	require.False(t, taken, "nothing to total on an empty ledger")
	postPhase("a", 7)
	first := b.checkpoint(t)
	times = append(times, first, first.Add(-time.Millisecond))
	b.requireReadsAgree(t, times)

	postPhase("b", 5)
	second := b.checkpoint(t)
	require.True(t, second.After(first))
	_, taken, err = b.ledger.Checkpoint(ctx)
	require.NoError(t, err)
	require.False(t, taken, "no line since the last checkpoint: none taken")
	postPhase("c", 4)
	times = append(times, second, second.Add(time.Millisecond), time.Time{})
	b.requireReadsAgree(t, times)

	var checkpoints, pairs int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(DISTINCT through), count(DISTINCT (account_code, currency)) FROM balance_checkpoints").
		Scan(&checkpoints, &pairs))
	require.Equal(t, 2, checkpoints)
	require.Equal(t, 4, pairs, "two accounts in two currencies")

	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	last := checks[len(checks)-1]
	require.Equal(t, "the latest balance checkpoint equals the sums of the lines it covers", last.Name)
	require.Equal(t, int64(4), last.Checked)
	require.Zero(t, last.Failures)

	// A line written by hand with a posting time the checkpoint covers (the owner can; the
	// runtime role cannot backdate through the service) is what verify finds.
	_, err = b.pool.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at, wallet_id)
		SELECT id, code, dir, 5, 'USD', $1, 'w-1' FROM (SELECT id FROM journal_entries WHERE currency = 'USD' LIMIT 1) e,
		(VALUES ('1010', 'debit'), ('2010', 'credit')) AS l (code, dir)`, first.Add(-time.Second))
	require.NoError(t, err)
	checks, err = b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	last = checks[len(checks)-1]
	require.Equal(t, int64(2), last.Failures)
	require.Equal(t, []string{"1010 USD", "2010 USD"}, last.Offenders)
}

// A checkpoint never covers a posting whose transaction is still open, whether or not
// PostgreSQL reports that transaction's start: a session with track_activities off (or one the
// GL's role may not see) shows none in pg_stat_activity, and a bound taken from there covered
// its lines, which then committed after the checkpoint: a balance of 100 where the lines sum
// to 140, and every later checkpoint built on it.
func TestACheckpointNeverCoversAnOpenTransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		trackActivities string
	}{
		{"when the posting session reports its transaction's start", "on"},
		{"when the posting session reports nothing, track_activities off", "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			_, err := b.post(t, entry("before", "USD", 100))
			require.NoError(t, err)

			conn, err := b.pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			_, err = conn.Exec(ctx, "SET track_activities = "+tc.trackActivities) // the tests connect as a superuser
			require.NoError(t, err)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = b.ledger.Post(ctx, tx, entry("open", "USD", 40))
			require.NoError(t, err)
			var openPostedAt time.Time
			require.NoError(t, tx.QueryRow(ctx, "SELECT posted_at FROM journal_entries WHERE transfer_id = 'open'").Scan(&openPostedAt))
			time.Sleep(1100 * time.Millisecond) // the open posting is older than the second pg_stat_activity's bound kept

			// While the posting is open, a checkpoint either stays before it or waits for it;
			// the wait is cut short here, so that the posting can commit.
			waiting, cancel := context.WithTimeout(ctx, 2*time.Second)
			through, taken, err := b.ledger.Checkpoint(waiting)
			cancel()
			if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded, "the checkpoint waits for the open posting")
			} else if taken {
				assert.True(t, through.Before(openPostedAt), "checkpoint through %s must stay before the open posting at %s", through, openPostedAt)
			}

			require.NoError(t, tx.Commit(ctx))
			_, err = conn.Exec(ctx, "RESET track_activities")
			require.NoError(t, err)
			got, err := b.ledger.AccountBalance(ctx, "1010", "USD", nil)
			require.NoError(t, err)
			require.Equal(t, gl.SumOf(140), got.Balance(), "the posting that committed after the checkpoint counts")
			through, taken, err = b.ledger.Checkpoint(ctx)
			require.NoError(t, err)
			require.True(t, taken, "the posting, committed, is totalled")
			require.True(t, through.After(openPostedAt))
			b.requireReadsAgree(t, []time.Time{through, openPostedAt, openPostedAt.Add(-time.Microsecond)})
			checks, err := b.ledger.Verify(ctx, 0)
			require.NoError(t, err)
			require.Zero(t, checks[len(checks)-1].Failures, "the latest checkpoint equals the sums of its lines")
		})
	}
}

// postAt posts an entry of amount at a posting time of the past, by hand: the tests' owner
// can, where serve's postings take the database's clock.
func (b *testBundle) postAt(t *testing.T, transferID, currency string, amount int64, at time.Time) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		id := uuid.Must(uuid.NewV7())
		if _, err := tx.Exec(ctx, `INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, posted_at)
			VALUES ($1, $2, $3, $4, $5, $5)`, id, id.String(), transferID, currency, at); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at, wallet_id)
			VALUES ($1, '1010', 'debit', $2, $3, $4, 'w-1'), ($1, '2010', 'credit', $2, $3, $4, 'w-1')`, id, amount, currency, at)
		return err
	}))
}

// checkpointAt takes a checkpoint through a time of the past, as serve would have then.
func (b *testBundle) checkpointAt(t *testing.T, through time.Time) {
	t.Helper()
	n, err := gldb.New(b.pool).TakeBalanceCheckpoint(context.Background(), gldb.TakeBalanceCheckpointParams{
		Through: through, MinLines: 1, StaleBefore: through,
	})
	require.NoError(t, err)
	require.Positive(t, n)
}

// checkpointTimes lists the times of the checkpoints left, oldest first.
func (b *testBundle) checkpointTimes(t *testing.T) []time.Time {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT DISTINCT through FROM balance_checkpoints ORDER BY through")
	require.NoError(t, err)
	times, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	for i := range times {
		times[i] = times[i].UTC()
	}
	return times
}

// Past the retention only each day's last checkpoint stays, and every read is still the sum of
// the lines: balances now and as of any time, the trial balance, a statement.
func TestThinnedCheckpointsLeaveEveryReadAsTheSumOfTheLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -5) // midnight UTC five days ago
	var asOf, all []time.Time
	for day := range 5 {
		for i, hour := range []int{3, 9, 15} {
			at := first.AddDate(0, 0, day).Add(time.Duration(hour) * time.Hour)
			currency := "USD"
			if i == 1 {
				currency = "EUR"
			}
			b.postAt(t, fmt.Sprintf("day%d-%d", day, i), currency, int64(10*day+i+1), at)
			b.checkpointAt(t, at.Add(time.Hour))
			all = append(all, at.Add(time.Hour))
			asOf = append(asOf, at.Add(-time.Minute), at, at.Add(30*time.Minute), at.Add(time.Hour), at.Add(2*time.Hour))
		}
	}
	_, err := b.post(t, entry("now", "USD", 7)) // a line after the latest checkpoint
	require.NoError(t, err)
	require.Equal(t, all, b.checkpointTimes(t))

	keepAfter := first.AddDate(0, 0, 3).Add(12 * time.Hour) // the fourth day at noon
	deleted, err := b.ledger.ThinCheckpoints(ctx, keepAfter)
	require.NoError(t, err)
	// Eight checkpoints: the first of two rows (two accounts in USD), seven of four (and EUR).
	require.Equal(t, int64(2+7*4), deleted)
	lastOf := func(day int) time.Time { return first.AddDate(0, 0, day).Add(16 * time.Hour) }
	require.Equal(t, []time.Time{
		lastOf(0), lastOf(1), lastOf(2),
		lastOf(3), // after the retention began, so is the fourth day's last: its earlier two went
		first.AddDate(0, 0, 4).Add(4 * time.Hour), first.AddDate(0, 0, 4).Add(10 * time.Hour), lastOf(4),
	}, b.checkpointTimes(t))
	b.requireReadsAgree(t, append(asOf, time.Now()))

	deleted, err = b.ledger.ThinCheckpoints(ctx, keepAfter)
	require.NoError(t, err)
	require.Zero(t, deleted, "thinned already")
	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, checks[len(checks)-1].Failures, "the latest checkpoint equals the sums of its lines")
}

// serve's checkpoint worker thins the checkpoints past its retention to each day's last.
func TestRunCheckpointsThinsPastTheRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	for i, hour := range []int{2, 8, 14} {
		at := day.Add(time.Duration(hour) * time.Hour)
		b.postAt(t, fmt.Sprintf("old-%d", i), "USD", 10, at)
		b.checkpointAt(t, at.Add(time.Minute))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.ledger.RunCheckpoints(ctx, postgres.CheckpointPolicy{Interval: time.Hour, Lines: 1_000, Retention: time.Hour}, zerolog.Nop())
	}()
	require.Eventually(t, func() bool { return len(b.checkpointTimes(t)) == 1 }, 20*time.Second, 100*time.Millisecond,
		"only the day's last checkpoint stays")
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, []time.Time{day.Add(14*time.Hour + time.Minute)}, b.checkpointTimes(t))
	b.requireReadsAgree(t, []time.Time{day.Add(3 * time.Hour), day.Add(9 * time.Hour), time.Now()})
}

// A checkpoint is due once the policy's lines, and 20 for each of its rows, were posted after
// the latest one, or once the latest is the policy's interval old; never when nothing was
// posted since.
func TestACheckpointIsDueAfterItsLinesOrItsInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	hourly := func(lines int64) postgres.CheckpointPolicy {
		return postgres.CheckpointPolicy{Interval: time.Hour, Lines: lines}
	}
	postN := func(phase string, n int) {
		for i := range n {
			_, err := b.post(t, entry(fmt.Sprintf("%s-%d", phase, i), "USD", int64(10+i)))
			require.NoError(t, err)
		}
		time.Sleep(1100 * time.Millisecond) // a second: the interval of the policies below
	}
	due := func(p postgres.CheckpointPolicy) bool {
		t.Helper()
		_, taken, err := b.ledger.CheckpointIfDue(ctx, p)
		require.NoError(t, err)
		return taken
	}

	postN("a", 1) // 1010 and 2010 in USD: the checkpoint's two rows
	require.True(t, due(hourly(1_000)), "the first checkpoint is due however few lines: there is none before it")
	postN("b", 19) // 38 lines
	require.False(t, due(hourly(4)), "38 lines are fewer than 20 for each of the checkpoint's two rows")
	postN("c", 1) // 40 lines
	require.False(t, due(hourly(41)), "40 lines after the latest checkpoint, 41 asked for, within the hour")
	require.True(t, due(hourly(40)), "40 lines, 40 asked for")
	postN("d", 1) // two lines, more than a second after the latest checkpoint's bound
	require.False(t, due(hourly(1)), "two lines, fewer than 20 a row")
	require.True(t, due(postgres.CheckpointPolicy{Interval: time.Second, Lines: 100}), "the latest checkpoint is older than the interval")
	require.False(t, due(postgres.CheckpointPolicy{Interval: time.Second, Lines: 1}), "no line since the latest checkpoint")

	var checkpoints int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(DISTINCT through) FROM balance_checkpoints").Scan(&checkpoints))
	require.Equal(t, 3, checkpoints)
	b.requireReadsAgree(t, []time.Time{time.Now()})
}

// serve's checkpoint worker takes one once the policy's lines were posted, not before, and
// stops with its context.
func TestRunCheckpointsTakesOneOnceItsLinesArePosted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.ledger.RunCheckpoints(ctx, postgres.CheckpointPolicy{Interval: time.Hour, Lines: 4}, zerolog.Nop())
	}()
	checkpoints := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(DISTINCT through) FROM balance_checkpoints").Scan(&n))
		return n
	}
	_, err := b.post(t, entry("first", "USD", 10))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return checkpoints() == 1 }, 10*time.Second, 100*time.Millisecond,
		"the first checkpoint: there is none before it")
	for i := range 19 { // 38 lines: fewer than 20 for each of the checkpoint's two rows
		_, err := b.post(t, entry(fmt.Sprintf("next-%d", i), "USD", 10))
		require.NoError(t, err)
	}
	time.Sleep(2500 * time.Millisecond) // two looks and more
	require.Equal(t, 1, checkpoints(), "38 lines do not make a checkpoint of two rows due")
	_, err = b.post(t, entry("next-19", "USD", 10)) // 40 lines
	require.NoError(t, err)
	require.Eventually(t, func() bool { return checkpoints() == 2 }, 10*time.Second, 100*time.Millisecond,
		"40 lines after the latest checkpoint")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("RunCheckpoints did not stop with its context")
	}
	b.requireReadsAgree(t, []time.Time{time.Now()})
}
