package faults_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests: every worker, election, limiter,
// counter store, client and proxy is stopped or closed before its target's subtest ends.
// testkit.GoleakOptions ignores rueidis' detached cluster-refresh goroutines and toxiproxy's stuck
// link stage (see its documentation).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
