// Package redlock_test runs the redlock module's behaviour against real servers: for every standalone
// target of internal/matrix (Redis 7.0, Redis 8, Valkey 8, Valkey 9) it starts five independent process
// servers and runs the scenarios on them. Cluster targets do not apply (Redlock needs independent
// deployments, and the group rejects Cluster clients), so they get no subtest.
package redlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every client and proxy is closed
// at t.Cleanup, the redlock group starts no background goroutine, and a lock's keep-alive goroutine
// ends when the lock does or is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
