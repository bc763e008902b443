package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

func TestBalanceAsOf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, e := range []gl.Entry{entry("t1", "USD", 100), entry("t2", "USD", 50), entry("t3", "USD", 7)} {
		_, err := b.post(t, e)
		require.NoError(t, err)
	}
	postedAt := func(transferID string) *time.Time {
		entries, err := b.ledger.EntriesByTransfer(ctx, transferID)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		return &entries[0].PostedAt
	}
	justBefore := postedAt("t1").Add(-time.Microsecond)

	tests := []struct {
		name  string
		asOf  *time.Time
		debit int64
	}{
		{"before the first posting the account is empty", &justBefore, 0},
		{"as of the zero time (year 1) the account is empty, not whole", &time.Time{}, 0},
		{"at an entry's posting time the entry counts", postedAt("t1"), 100},
		{"between postings only the earlier ones count", postedAt("t2"), 150},
		{"without as_of every posting counts", nil, 157},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			debit, err := b.ledger.AccountBalance(ctx, "1010", "USD", tt.asOf)
			require.NoError(t, err)
			require.Equal(t, gl.SumOf(tt.debit), debit.Balance())
			require.Equal(t, tt.asOf, debit.AsOf, "the time asked is the time answered")
			credit, err := b.ledger.AccountBalance(ctx, "2010", "USD", tt.asOf)
			require.NoError(t, err)
			require.Equal(t, gl.SumOf(tt.debit), credit.Balance(), "a liability grows on the credit side")
			require.Equal(t, gl.SumOf(tt.debit), credit.Credits)
		})
	}
}

func TestStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	amounts := []int64{10, 20, 30, 40, 50}
	for i, a := range amounts {
		_, err := b.post(t, entry("t"+string(rune('a'+i)), "USD", a))
		require.NoError(t, err)
	}
	_, err := b.post(t, entry("t-eur", "EUR", 999))
	require.NoError(t, err)

	t.Run("pages follow each other with running balances that carry over", func(t *testing.T) {
		t.Parallel()
		var got []gl.StatementLine
		cursor := ""
		pages := 0
		for {
			st, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", After: cursor, Limit: 2})
			require.NoError(t, err)
			pages++
			got = append(got, st.Lines...)
			if st.NextCursor == "" {
				break
			}
			cursor = st.NextCursor
		}
		require.Equal(t, 3, pages)
		require.Len(t, got, len(amounts))
		var running int64
		for i, l := range got {
			running += amounts[i]
			require.Equal(t, gl.Credit, l.Direction)
			require.Equal(t, amounts[i], l.Amount)
			require.Equal(t, gl.SumOf(running), l.RunningBalance, "line %d", i)
			require.Equal(t, "t"+string(rune('a'+i)), l.TransferID)
			require.NotEmpty(t, l.EventID)
		}
	})

	t.Run("a debit account runs in the debit sign", func(t *testing.T) {
		t.Parallel()
		st, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "1010", Currency: "USD"})
		require.NoError(t, err)
		require.Len(t, st.Lines, 5)
		require.Equal(t, gl.SumOf(150), st.Lines[4].RunningBalance)
		require.Empty(t, st.NextCursor)
	})

	t.Run("other currencies stay out", func(t *testing.T) {
		t.Parallel()
		st, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "1010", Currency: "EUR"})
		require.NoError(t, err)
		require.Len(t, st.Lines, 1)
		require.Equal(t, gl.SumOf(999), st.Lines[0].RunningBalance)
	})

	t.Run("a malformed cursor is refused", func(t *testing.T) {
		t.Parallel()
		_, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "1010", Currency: "USD", After: "x"})
		require.ErrorIs(t, err, gl.ErrInvalidCursor)
	})

	t.Run("an unknown account is not found", func(t *testing.T) {
		t.Parallel()
		_, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "9999", Currency: "USD"})
		require.ErrorIs(t, err, gl.ErrAccountNotFound)
	})
}

func TestEntriesByEventAndTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var posted []gl.Entry
	for i := range 5 {
		e := entry("t"+string(rune('a'+i)), "USD", int64(i+1))
		_, err := b.post(t, e)
		require.NoError(t, err)
		posted = append(posted, e)
	}

	t.Run("an event finds its entry with lines", func(t *testing.T) {
		t.Parallel()
		got, err := b.ledger.EntriesByEvent(ctx, posted[2].EventID)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, posted[2].ID, got[0].ID)
		require.Equal(t, posted[2].Lines, got[0].Lines)
		none, err := b.ledger.EntriesByEvent(ctx, "no-such-event")
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("pages by posting time cover every entry once, in order", func(t *testing.T) {
		t.Parallel()
		var ids []string
		cursor := ""
		for {
			page, err := b.ledger.Entries(ctx, gl.EntryQuery{After: cursor, Limit: 2})
			require.NoError(t, err)
			for _, e := range page.Entries {
				ids = append(ids, e.ID.String())
				require.Len(t, e.Lines, 2)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		var want []string
		for _, e := range posted {
			want = append(want, e.ID.String())
		}
		require.Equal(t, want, ids)
	})

	t.Run("a time range keeps from and drops to", func(t *testing.T) {
		t.Parallel()
		all, err := b.ledger.Entries(ctx, gl.EntryQuery{})
		require.NoError(t, err)
		require.Len(t, all.Entries, 5)
		page, err := b.ledger.Entries(ctx, gl.EntryQuery{From: &all.Entries[1].PostedAt, To: &all.Entries[3].PostedAt})
		require.NoError(t, err)
		require.Len(t, page.Entries, 2)
		require.Equal(t, posted[1].ID, page.Entries[0].ID)
		require.Equal(t, posted[2].ID, page.Entries[1].ID)
		yearOne := time.Time{}
		none, err := b.ledger.Entries(ctx, gl.EntryQuery{To: &yearOne})
		require.NoError(t, err)
		require.Empty(t, none.Entries, "the zero time is a bound like any other, not an open end")
	})
}

func TestChartOfAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	account, err := gl.NewAccount("4010", "Fee revenue", gl.Revenue)
	require.NoError(t, err)
	added, err := b.ledger.AddAccount(ctx, account)
	require.NoError(t, err)
	require.Equal(t, gl.Account{Code: "4010", Name: "Fee revenue", Type: gl.Revenue, NormalBalance: gl.Credit}, added)

	_, err = b.ledger.AddAccount(ctx, account)
	require.ErrorIs(t, err, gl.ErrAccountExists)

	all, err := b.ledger.Accounts(ctx)
	require.NoError(t, err)
	var codes []string
	for _, a := range all {
		codes = append(codes, a.Code)
	}
	require.Equal(t, []string{"1010", "2010", "2020", "4010"}, codes)

	for _, bad := range []struct{ code, name, typ string }{
		{"", "No code", "asset"}, {"1 0", "Space", "asset"}, {"1020", " ", "asset"}, {"1020", "Cash", "cash"},
	} {
		_, err := gl.NewAccount(bad.code, bad.name, gl.AccountType(bad.typ))
		require.ErrorIs(t, err, gl.ErrInvalidAccount, "%+v", bad)
	}
}
