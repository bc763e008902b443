package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/systemtest"
	"walletgl/tools/internal/pgcluster"
)

// Failover is one change of the databases' primary in an HA scenario and what it cost.
type Failover struct {
	How  string    `json:"how"` // "kill -9" or "switchover"
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
	// Write is the time from the fault to the first write the harness committed through the
	// cluster's multi-host URL (on the new primary and its synchronous standby).
	Write time.Duration `json:"write"`
	// ClientGap is the longest time clients of the load went without a 201, from the fault
	// to 30 s after the harness's first write (0: no 201 in that time).
	ClientGap time.Duration `json:"client_gap"`
	// Errors counts the load's attempts that ended between the fault and that 201 without a
	// 2xx, by status (0: no answer).
	Errors map[int]int `json:"errors"`
	// Unready names the services whose GET /readyz answered 503 before writes came back (a
	// kill leaves no primary for longer than a ttl: each must have said so).
	Unready []string `json:"unready,omitempty"`
}

func (f Failover) String() string {
	gap := "no 201 at all"
	if f.ClientGap > 0 {
		gap = f.ClientGap.Round(10 * time.Millisecond).String()
	}
	unready := "none"
	if len(f.Unready) > 0 {
		unready = strings.Join(f.Unready, ", ")
	}
	return fmt.Sprintf("%-10s %s → %s: first write after %s, clients without a 201 for %s at most; clients meanwhile: %s; /readyz 503 meanwhile: %s",
		f.How, f.From, f.To, f.Write.Round(10*time.Millisecond), gap, statusCounts(f.Errors), unready)
}

// statusCounts writes counts by status in order ("none" when empty; 0 reads "no answer").
func statusCounts(counts map[int]int) string {
	if len(counts) == 0 {
		return "none"
	}
	statuses := make([]int, 0, len(counts))
	for s := range counts {
		statuses = append(statuses, s)
	}
	sort.Ints(statuses)
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		name := fmt.Sprint(s)
		if s == 0 {
			name = "no answer"
		}
		parts[i] = fmt.Sprintf("%s ×%d", name, counts[s])
	}
	return strings.Join(parts, ", ")
}

func (s *System) addFailover(f Failover) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failovers = append(s.failovers, f)
}

// takeFailovers returns the run's failovers with what the clients of the load saw of each:
// the longest stretch without a 201 from the fault to 30 s after writes came back, and the
// attempts that ended without a 2xx between the fault and the first 201 after that stretch.
func (s *System) takeFailovers(attempts []Attempt) []Failover {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Failover, len(s.failovers))
	for i, f := range s.failovers {
		end := f.At.Add(f.Write + 30*time.Second)
		var created []time.Time
		for _, a := range attempts {
			if done := a.Sent.Add(a.Took); a.Status == 201 && done.After(f.At) && !done.After(end) {
				created = append(created, done)
			}
		}
		slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
		var gapEnd time.Time
		last := f.At
		for _, c := range created {
			if gap := c.Sub(last); gap > f.ClientGap {
				f.ClientGap, gapEnd = gap, c
			}
			last = c
		}
		f.Errors = map[int]int{}
		for _, a := range attempts {
			done := a.Sent.Add(a.Took)
			if done.After(f.At) && (gapEnd.IsZero() || !done.After(gapEnd)) && a.Status/100 != 2 {
				f.Errors[a.Status]++
			}
		}
		out[i] = f
	}
	return out
}

// pgFailover is the pg-failover scenario's faults, on a cluster that holds both services'
// databases: the primary killed (kill -9 of Patroni and of the postmaster: the machine lost)
// while the wallet writes, brought back as a replica, then the next primary killed the same
// way while the GL writes; then a replica's WAL replay frozen (a standby that lags), a planned
// switchover to the synchronous standby while it lags, and the replay resumed.
func pgFailover(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	if !sleepCtx(ctx, d/8) {
		return nil
	}
	for _, whose := range []string{"the wallet's", "the GL's"} {
		if err := killPrimary(ctx, s, whose); err != nil {
			return err
		}
	}
	if err := switchoverWhileLagging(ctx, s, max(d/6, 5*time.Second)); err != nil {
		return err
	}
	_, err := s.HA.WaitWhole(ctx, 2*time.Minute)
	return err
}

// killPrimary kills the cluster's primary, measures the time until a write commits again, and
// starts the killed node's Patroni again, as an operator replaces a lost machine.
func killPrimary(ctx context.Context, s *System, whose string) error {
	h := s.HA
	leader, err := h.WaitWhole(ctx, 2*time.Minute)
	if err != nil {
		return err
	}
	s.log.Fault("kill -9 Patroni and the postmaster of %s, the primary (%s database among others)", leader.Name, whose)
	at := time.Now()
	if err := leader.Kill(); err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	unready := make(chan []string, 1)
	go func() { unready <- s.watchReadiness(watchCtx) }()
	took, err := probeWrite(ctx, h.URL("postgres"), 2*time.Minute)
	stopWatching()
	down := <-unready
	if err != nil {
		return err
	}
	next, err := h.WaitLeader(ctx, time.Minute)
	if err != nil {
		return err
	}
	s.log.Note("%s promoted; a write committed %s after the kill", next.Name, took.Round(10*time.Millisecond))
	s.addFailover(Failover{How: "kill -9", From: leader.Name, To: next.Name, At: at, Write: took, Unready: down})
	s.log.Fault("start %s's Patroni again: it rejoins as a replica", leader.Name)
	return leader.Start()
}

// switchoverWhileLagging freezes WAL replay on the replica that is not the synchronous standby
// for lag (a standby that falls behind: it receives the WAL and applies none of it), reads how
// far behind it is, switches the primary over to the synchronous standby while it still lags
// (Patroni's REST API, as patronictl switchover does), and resumes the replay.
func switchoverWhileLagging(ctx context.Context, s *System, lag time.Duration) error {
	h := s.HA
	leader, err := h.WaitWhole(ctx, 2*time.Minute)
	if err != nil {
		return err
	}
	members, err := h.Members(ctx)
	if err != nil {
		return err
	}
	var syncStandby, replica *pgcluster.Node
	for _, m := range members {
		switch m.Role {
		case "sync_standby":
			syncStandby = h.Node(m.Name)
		case "replica":
			replica = h.Node(m.Name)
		}
	}
	if syncStandby == nil {
		return fmt.Errorf("switchover: no synchronous standby among %v", members)
	}
	if replica != nil {
		if err := replica.StopReplay(); err != nil {
			return err
		}
		s.log.Fault("freeze WAL replay on %s, a replica (SIGSTOP of its startup process), for %s: it falls behind", replica.Name, lag)
		sleepCtx(ctx, lag)
		var behind int64
		if err := onNode(ctx, replica, "SELECT coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0)::bigint", &behind); err != nil {
			s.log.Note("read the replay lag of %s: %v", replica.Name, err)
		}
		s.log.Note("%s has %d bytes of WAL received and not replayed", replica.Name, behind)
	}
	s.log.Fault("switchover from %s to %s, the synchronous standby (Patroni's REST API)", leader.Name, syncStandby.Name)
	at := time.Now()
	if err := h.Switchover(ctx, leader, syncStandby); err != nil {
		return err
	}
	took, err := probeWrite(ctx, h.URL("postgres"), 2*time.Minute)
	if err != nil {
		return err
	}
	s.log.Note("%s is the primary; a write committed %s after the switchover began", syncStandby.Name, took.Round(10*time.Millisecond))
	s.addFailover(Failover{How: "switchover", From: leader.Name, To: syncStandby.Name, At: at, Write: took})
	if replica == nil {
		return nil
	}
	if err := replica.ResumeReplay(); err != nil {
		return err
	}
	s.log.Fault("resume WAL replay on %s", replica.Name)
	return nil
}

// watchReadiness asks every service's GET /readyz every 200 ms until ctx ends and returns the
// names of those that answered 503 at least once.
func (s *System) watchReadiness(ctx context.Context) []string {
	client := &http.Client{Timeout: time.Second}
	seen := map[string]bool{}
	for {
		for _, p := range append(append([]*systemtest.Process{}, s.Wallets...), s.GLs...) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr+"/readyz", nil)
			if err != nil {
				continue
			}
			if resp, err := client.Do(req); err == nil {
				_ = resp.Body.Close()
				seen[p.Name] = seen[p.Name] || resp.StatusCode == http.StatusServiceUnavailable
			}
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			break
		}
	}
	var names []string
	for name, down := range seen {
		if down {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// readinessFollowed checks that every service said it was unready during each kill's failover.
func readinessFollowed(s *System, failovers []Failover) Check {
	const name = "every service's /readyz answered 503 while a killed primary had no successor"
	var problems []string
	kills := 0
	for _, f := range failovers {
		if f.How != "kill -9" {
			continue
		}
		kills++
		for _, p := range append(append([]*systemtest.Process{}, s.Wallets...), s.GLs...) {
			if !slices.Contains(f.Unready, p.Name) {
				problems = append(problems, fmt.Sprintf("%s stayed ready through the failover from %s", p.Name, f.From))
			}
		}
	}
	return Check{Name: name, Passed: kills > 0 && len(problems) == 0, Detail: fmt.Sprintf("%d failovers by kill%s", kills, list(problems))}
}

// onNode runs query on node alone, scanning its one value into dest (nil: none).
func onNode(ctx context.Context, node *pgcluster.Node, query string, dest any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, node.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	row := conn.QueryRow(ctx, query)
	if dest == nil {
		var ignored any
		return row.Scan(&ignored)
	}
	return row.Scan(dest)
}

// probeWriteSQL is the harness's write: a row, whose commit waits for the synchronous standby.
// A transaction that writes no WAL before its commit record (one that only took an xid) would
// not wait for it.
const probeWriteSQL = "CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz); INSERT INTO failover_probe VALUES (clock_timestamp())"

// probeWrite commits a write (probeWriteSQL) through url every 100 ms until one succeeds, for
// timeout at most, and returns how long that took.
func probeWrite(ctx context.Context, url string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		// A connection that takes long is to a server that went away; a commit that takes long
		// waits for the synchronous standby, as the services' commits do: it is not cut short.
		connecting, stop := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(connecting, url)
		stop()
		if err == nil {
			_, err = conn.Exec(ctx, probeWriteSQL)
			_ = conn.Close(context.WithoutCancel(ctx))
		}
		if err == nil {
			return time.Since(start), nil
		}
		last = err
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return 0, fmt.Errorf("no write committed within %s of the failover: %w", timeout, last)
}
