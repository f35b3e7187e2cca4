// Package replicaack_test checks the replica acknowledgement (WithReplicaAck, luakit.ReplicaAck) of
// every primitive that grants a hold against real replicated servers: the Sentinel targets of
// internal/matrix (a primary, a replica whose replication stream the test can hold back, three
// Sentinels) and Clusters with one replica per primary (see ../README.md for how to select targets).
package replicaack_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests (testkit.GoleakOptions: one
// rueidis cluster-refresh goroutine is ignored, as in every suite that makes cluster clients).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
