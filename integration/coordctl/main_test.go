// Package coordctl_test runs the coordctl command (through coordctl.Run, in process) and the modules'
// inspection and admin functions it is built on against real servers: the matrix of internal/matrix
// (Redis 7.0, Redis 8, Valkey 8, Valkey 9, a Redis Cluster and a Valkey Cluster; see ../README.md for
// how to select targets).
package coordctl_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every client is closed at
// t.Cleanup and coordctl.Run closes its own. testkit.GoleakOptions ignores only rueidis' detached
// cluster-refresh goroutine (see its documentation).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
