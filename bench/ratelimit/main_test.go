package ratelimitbench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the benchmarks: every client, server and
// waiter a benchmark starts must be closed or stopped before it returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
