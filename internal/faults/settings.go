package faults

import "walletgl/internal/config"

// Settings arm a process's fault points: FAULTS and FAULTS_SEED.
type Settings struct {
	Spec string
	Seed int
}

// Bind declares the fault settings.
func (c *Settings) Bind(s *config.Set) {
	s.String(&c.Spec, "FAULTS", "faults", "", "arms fault points for game days and the fault harness, e.g. gl.consumer.after_commit:crash@0.05 (empty: none)")
	s.Int(&c.Seed, "FAULTS_SEED", "faults-seed", 1, "seed of the fault points' draws, for repeatable runs")
}

// Set parses FAULTS; nil when no fault point is armed.
func (c Settings) Set() (*Set, error) {
	return Parse(c.Spec, uint64(c.Seed))
}
