package stopwait

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every shared read must end by
// Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
