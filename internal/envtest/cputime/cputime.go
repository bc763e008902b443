// Package cputime reads the CPU time of the running process, for benchmarks that report CPU per
// operation besides wall time (noisy on a shared machine). It imports nothing of the project, so
// any package's tests may use it.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Process is the CPU time the process has used so far, user and system, every thread's (the
// garbage collector's and, for a broker run inside the test, the broker's included).
func Process(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
