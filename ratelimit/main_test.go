package ratelimit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every Limiter's queue goroutine and
// every Keyed's background goroutine must stop in Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
