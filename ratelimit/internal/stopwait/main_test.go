package stopwait

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: Wait's own waiter ends with wg.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
