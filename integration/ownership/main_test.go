// Package ownership_test is the conformance suite of luakit/ownership's contract (the table in
// luakit/ownership/doc.go): every owner-token handle of Coordkit (lock.Lease, lease.Lease, rwlock.Lease
// in read and write mode, semaphore.Permit, redlock.Lease) is driven through the same scenarios on every
// target of the matrix of internal/matrix (see ../README.md for how to select targets).
package ownership_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: a keep-alive that did not stop on
// loss, a waiter that did not return, a client not closed. testkit.GoleakOptions ignores only the
// rueidis goroutines a cluster client leaves behind on purpose after Close. The scenarios mostly wait
// on TTLs and sleeps (about 15% of one core per target under -race), so four targets run at once.
func TestMain(m *testing.M) {
	matrix.SetParallelTargets(4)
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
