package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"walletgl/internal/cli"
	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

// verifyCmd checks the GL's invariants on the live database. It only reads: the database is
// neither created nor migrated, so pointing it at the wrong URL fails instead of creating one.
func verifyCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, s := loadConfigWith("gl verify", env, func(s *flagSet) { s.jsonFlag() })
	if err := s.parse(args, cfg); err != nil {
		return err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, database.ToolMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	checks, err := postgres.NewLedger(pool).Verify(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	failed := 0
	for _, c := range checks {
		if !c.Passed() {
			failed++
		}
	}
	if s.json {
		type checkJSON struct {
			Name      string   `json:"name"`
			Passed    bool     `json:"passed"`
			Checked   int64    `json:"checked"`
			Failures  int64    `json:"failures"`
			Offenders []string `json:"offenders"`
		}
		out := struct {
			Database string      `json:"database"`
			Passed   bool        `json:"passed"`
			Checks   []checkJSON `json:"checks"`
		}{Database: pool.Config().ConnConfig.Database, Passed: failed == 0}
		for _, c := range checks {
			out.Checks = append(out.Checks, checkJSON{c.Name, c.Passed(), c.Checked, c.Failures, c.Offenders})
		}
		if err := cli.JSON(env.Stdout, out); err != nil {
			return err
		}
	} else {
		writeVerifyReport(env.Stdout, pool.Config().ConnConfig.Database, checks, failed)
	}
	if failed > 0 {
		return fmt.Errorf("verify: %d of %d checks failed", failed, len(checks))
	}
	return nil
}

func writeVerifyReport(w io.Writer, db string, checks []gl.Check, failed int) {
	fmt.Fprintf(w, "gl verify: database %s\n", db)
	for _, c := range checks {
		status := "PASS"
		if !c.Passed() {
			status = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %d checked, %d failing\n", status, c.Name, c.Checked, c.Failures)
		if len(c.Offenders) > 0 {
			more := ""
			if int64(len(c.Offenders)) < c.Failures {
				more = fmt.Sprintf(" (and %d more)", c.Failures-int64(len(c.Offenders)))
			}
			fmt.Fprintf(w, "        %s%s\n", strings.Join(c.Offenders, ", "), more)
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "verdict: PASS, all %d checks hold\n", len(checks))
		return
	}
	fmt.Fprintf(w, "verdict: FAIL, %d of %d checks failed\n", failed, len(checks))
}
