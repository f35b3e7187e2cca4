// Package idempotency_test runs the idempotency module and its idemhttp middleware against real
// servers: the matrix of internal/matrix (Redis 7.0, Redis 8, Valkey 8, Valkey 9, a Redis Cluster and
// a Valkey Cluster; see ../README.md for how to select targets).
package idempotency_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every client and httptest server
// is closed at t.Cleanup. testkit.GoleakOptions ignores only the cluster client's delayed
// connection-closing goroutine (see its doc).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
