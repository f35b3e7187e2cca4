package coordctl_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any goroutine outlives the tests: Run closes every client it
// creates before it returns. Ignored, as testkit.GoleakOptions does (this module does not import
// testkit): rueidis' detached goroutines that delay a topology refresh after a failed dial (sleeping
// up to 1s) and close replaced connections after a refresh; they are not Coordkit code.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	)
}
