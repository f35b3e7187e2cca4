package ratelimithttp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: the middleware starts none, and
// every Limiter and Keyed its tests create must stop its goroutines in Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
