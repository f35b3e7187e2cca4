package testkit

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, GoleakOptions()...)
}

// firstAvailable returns the first target of Targets() whose binary is installed (the process
// backend), skipping the test (failing on CI) when there is none.
func firstAvailable(t *testing.T) Target {
	t.Helper()
	var firstErr error
	for _, target := range Targets() {
		if _, err := Binary(target); err == nil {
			return target
		} else if firstErr == nil {
			firstErr = err
		}
	}
	FailOrSkip(t, firstErr)
	return ""
}

// eachTarget runs f as a parallel subtest per target of Targets().
func eachTarget(t *testing.T, f func(t *testing.T, target Target)) {
	for _, target := range Targets() {
		t.Run(string(target), func(t *testing.T) {
			t.Parallel()
			f(t, target)
		})
	}
}
