package cli

import (
	"fmt"
	"strings"
)

// Check is the outcome of one invariant check of `wallet verify` or `gl verify`, in the one
// shape both print.
type Check struct {
	Name    string   `json:"name"`    // what must hold, as a sentence
	OK      bool     `json:"ok"`      // nothing breaks it
	Checked int64    `json:"checked"` // how many things were looked at
	Failed  int64    `json:"failed"`  // how many break it
	Sample  []string `json:"sample"`  // the first of those (ids), never null
	Detail  string   `json:"detail"`  // the counts for people: "3 transfers checked, 1 failing"
}

// NewCheck makes the Check of an invariant: checked things (of unit, "" when the name says what
// they are), failed of them breaking it, sample naming the first.
func NewCheck(name, unit string, checked, failed int64, sample []string) Check {
	if unit != "" {
		unit += " "
	}
	return Check{
		Name: name, OK: failed == 0, Checked: checked, Failed: failed, Sample: append([]string{}, sample...),
		Detail: fmt.Sprintf("%d %schecked, %d failing", checked, unit, failed),
	}
}

// Verification is what verify prints with --json.
type Verification struct {
	Database string  `json:"database"`
	OK       bool    `json:"ok"`
	Checks   []Check `json:"checks"`
}

// WriteVerification prints the checks made on database: a line a check (the sample under a
// failing one) and a verdict, or the Verification as JSON. When a check fails it returns the
// error that makes the command exit 1.
func WriteVerification(env Env, database string, checks []Check, asJSON bool) error {
	failed := 0
	for _, c := range checks {
		if !c.OK {
			failed++
		}
	}
	if asJSON {
		if err := JSON(env.Stdout, Verification{Database: database, OK: failed == 0, Checks: checks}); err != nil {
			return err
		}
	} else {
		writeChecks(env, database, checks, failed)
	}
	if failed > 0 {
		return fmt.Errorf("verify: %d of %d checks failed", failed, len(checks))
	}
	return nil
}

func writeChecks(env Env, database string, checks []Check, failed int) {
	w := env.Stdout
	fmt.Fprintf(w, "%s: database %s\n", env.Name, database)
	for _, c := range checks {
		result := "PASS"
		if !c.OK {
			result = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", result, c.Name, c.Detail)
		if len(c.Sample) > 0 {
			more := ""
			if int64(len(c.Sample)) < c.Failed {
				more = fmt.Sprintf(" (and %d more)", c.Failed-int64(len(c.Sample)))
			}
			fmt.Fprintf(w, "        %s%s\n", strings.Join(c.Sample, ", "), more)
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "verdict: PASS, all %d checks hold\n", len(checks))
		return
	}
	fmt.Fprintf(w, "verdict: FAIL, %d of %d checks failed\n", failed, len(checks))
}
