// Package resharding_test checks, on the Cluster targets of the matrix, that a slot migration is
// invisible to the callers of single-attempt operations: while a slot moves to another primary and
// back (keys moved one MIGRATE at a time), lock try-acquisitions, rate-limit decisions and counter
// increments and reads of keys in that slot never return the server's TRYAGAIN, and nothing is lost.
package resharding_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests. Besides testkit.GoleakOptions
// (rueidis' detached cluster-refresh goroutine) it ignores the one rueidis starts when a redirect
// leads back to the node a command was first sent to (the client's map named the destination, which
// answered MOVED to the source while only importing, and the source ASK back): rueidis opens a new
// connection to that node and closes the old one 5 s later, in a goroutine nothing waits for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions(
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient).redirectOrNew.func1"))...)
}
