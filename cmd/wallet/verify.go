package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"walletgl/internal/cli"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// verifyCmd checks the wallet's invariants on the live database and fails (non-zero exit)
// when one does not hold, so it can guard a deployment or a cron job.
func verifyCmd(ctx context.Context, env cli.Env, args []string) error {
	fs := newFlags("wallet verify", env)
	asJSON := fs.Bool("json", false, "print JSON instead of a report")
	o, err := openOps(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer o.pool.Close()
	checks, err := postgres.Verify(ctx, o.pool, wallet.VerifyOptions{Retention: o.cfg.Events.Retention})
	if err != nil {
		return err
	}
	failed := 0
	for _, c := range checks {
		if !c.OK() {
			failed++
		}
	}
	if *asJSON {
		if err := cli.JSON(env.Stdout, struct {
			OK     bool           `json:"ok"`
			Checks []wallet.Check `json:"checks"`
		}{failed == 0, checks}); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(checks))
		for _, c := range checks {
			result, offending := "PASS", "-"
			if !c.OK() {
				result, offending = "FAIL", strings.Join(c.Sample, " ")
				if c.Failed > int64(len(c.Sample)) {
					offending += fmt.Sprintf(" (first %d)", len(c.Sample))
				}
			}
			rows = append(rows, []string{result, c.Name, strconv.FormatInt(c.Checked, 10) + " " + c.Unit,
				strconv.FormatInt(c.Failed, 10), offending})
		}
		if err := cli.Table(env.Stdout, []string{"RESULT", "CHECK", "CHECKED", "FAILED", "OFFENDING"}, rows); err != nil {
			return err
		}
		if failed == 0 {
			fmt.Fprintf(env.Stdout, "verdict: PASS, all %d checks hold\n", len(checks))
		} else {
			fmt.Fprintf(env.Stdout, "verdict: FAIL, %d of %d checks fail\n", failed, len(checks))
		}
	}
	if failed > 0 {
		return fmt.Errorf("verify: %d of %d checks fail", failed, len(checks))
	}
	return nil
}
