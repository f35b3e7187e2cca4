package coordctl_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any goroutine outlives the tests: Run closes every client it
// creates before it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
