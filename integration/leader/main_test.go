// Package leader_test runs the leader module's behaviour against real servers: the matrix of
// internal/matrix (Redis 7.0, Redis 8, Valkey 8, Valkey 9, a Redis Cluster and a Valkey Cluster; see
// ../README.md for how to select targets).
package leader_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every Run has returned and every
// client is closed at t.Cleanup. testkit.GoleakOptions ignores only the cluster client's detached
// topology-refresh goroutine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
