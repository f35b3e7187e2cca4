// Package clientkept_test checks, on every target of the matrix, that no primitive's Close, Shutdown
// or Stop closes the caller's rueidis client: the client is used after each of them.
package clientkept_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when any goroutine outlives the tests (testkit.GoleakOptions ignores only
// rueidis' detached cluster-refresh goroutine).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}
