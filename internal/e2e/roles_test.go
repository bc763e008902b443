package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
)

// Both binaries run as runtime roles of their own, as in production: serve migrates as the
// owner (the *_MIGRATE_DATABASE_URL settings) and grants the role of *_DATABASE_URL what the
// service needs. Transfers are posted and acknowledged, the operator commands work with the
// runtime URL, and nothing warns of a superuser or an owner.
func TestTheServicesRunAsTheirRuntimeRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	natsURL := envtest.NATSURL(t)
	ns := envtest.Namespace(t, natsURL)
	dir := t.TempDir()
	bins, err := systemtest.Build(ctx, dir)
	require.NoError(t, err)

	walletOwner, glOwner := envtest.DatabaseURL(t), envtest.DatabaseURL(t)
	walletURL, glURL := envtest.RoleURL(t, walletOwner), envtest.RoleURL(t, glOwner)
	common := []string{
		"NATS_URL=" + natsURL, "EVENTS_NAMESPACE=" + ns, envtest.StreamEnv, "LOG_FORMAT=json", "LOG_LEVEL=info",
		"EVENTS_POLL_INTERVAL=500ms", "EVENTS_ACK_TIMEOUT=10s",
	}
	keys := envtest.NewEventKeys(t)
	walletProc, err := systemtest.Service("wallet", bins.Wallet, "WALLET", walletURL, dir,
		slices.Concat([]string{"WALLET_MIGRATE_DATABASE_URL=" + walletOwner}, keys.Env(contract.SourceWallet), common))
	require.NoError(t, err)
	glProc, err := systemtest.Service("gl", bins.GL, "GL", glURL, dir,
		slices.Concat([]string{"GL_MIGRATE_DATABASE_URL=" + glOwner, "GL_CHECKPOINT_INTERVAL=1s"}, keys.Env(contract.SourceGL), common))
	require.NoError(t, err)
	for _, p := range []*systemtest.Process{walletProc, glProc} {
		require.NoError(t, p.Start())
		t.Cleanup(func() {
			if err := p.Stop(20 * time.Second); err != nil {
				t.Errorf("graceful stop: %v", err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", p.Name, p.Tail(40))
			}
		})
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, walletProc.WaitHealthy(waitCtx))
	require.NoError(t, glProc.WaitHealthy(waitCtx))

	// keys create, an operator's command, runs with the service's settings: it writes the key as
	// the owner (the migrate URL), since the runtime role may only read keys.
	walletAPI, glAPI := systemtest.NewClient(walletProc.Addr), systemtest.NewClient(glProc.Addr)
	walletAPI.Key, glAPI.Key = createKey(t, walletProc), createKey(t, glProc)
	require.NoError(t, walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, walletAPI.CreateWallet(ctx, "alice", "USD", false))
	const n = 5
	for i := range n {
		resp, err := walletAPI.Transfer(ctx, fmt.Sprintf("roles-%d", i),
			systemtest.TransferRequest{FromWalletID: "bank", ToWalletID: "alice", Amount: int64(10 + i), Currency: "USD"})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}
	walletDB, glDB := openPool(t, walletOwner), openPool(t, glOwner)
	require.Eventually(t, func() bool {
		var open, entries int
		require.NoError(t, walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		require.NoError(t, glDB.QueryRow(ctx, "SELECT count(*) FROM journal_entries").Scan(&entries))
		return open == 0 && entries == n
	}, 60*time.Second, 200*time.Millisecond, "every transfer posted once and acknowledged")
	// The runtime role takes balance checkpoints (it sees its own sessions' transactions): the
	// latest totals every posting.
	require.Eventually(t, func() bool {
		var total int64
		require.NoError(t, glDB.QueryRow(ctx, `SELECT coalesce(sum(debits), 0)::bigint FROM balance_checkpoints
			WHERE account_code = '1010' AND through = (SELECT max(through) FROM balance_checkpoints)`).Scan(&total))
		return total == n*10+n*(n-1)/2
	}, 30*time.Second, 200*time.Millisecond, "a checkpoint of every posting")

	for _, c := range []struct {
		bin string
		env []string
	}{
		{bins.Wallet, []string{"WALLET_DATABASE_URL=" + walletURL}},
		{bins.GL, []string{"GL_DATABASE_URL=" + glURL}},
	} {
		out, err := runCommand(t, c.bin, slices.Concat(common, c.env), "verify")
		require.NoError(t, err, "%s verify as the runtime role:\n%s", c.bin, out)
		out, err = runCommand(t, c.bin, slices.Concat(common, c.env), "keys", "create", "--name", "rogue", "--scopes", "admin")
		require.Error(t, err, "%s keys create as the runtime role:\n%s", c.bin, out)
		require.Contains(t, out, "permission denied")
		require.Contains(t, out, "_MIGRATE_DATABASE_URL")
	}

	for _, p := range []*systemtest.Process{walletProc, glProc} {
		log, err := os.ReadFile(p.Log)
		require.NoError(t, err)
		require.Contains(t, string(log), "runtime role granted the service's privileges")
		for _, warning := range []string{"superuser", "owner of its database", "nothing granted"} {
			require.NotContains(t, string(log), warning, "%s", p.Name)
		}
	}
}

func runCommand(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
