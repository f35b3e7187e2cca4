// Package semaphore_test runs the semaphore module's behaviour against real servers: the matrix of
// internal/matrix (Redis 7.0, Redis 8, Valkey 8, Valkey 9, a Redis Cluster and a Valkey Cluster; see
// ../README.md for how to select targets).
package semaphore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every client is closed at
// t.Cleanup, and every Semaphore is shut down (its background cleanup retries end) before that.
//
// testkit.GoleakOptions ignores exactly one rueidis goroutine: a cluster client's topology refresh
// closes replaced connections from a detached goroutine that sleeps 5 s first, so it can outlive
// Close. Nothing else is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
