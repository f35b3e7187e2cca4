// Package hooks_test checks Coordkit's operation hooks on real servers: the hook rules of
// docs/hooks.md and the OpenTelemetry adapter on a real Locker.
package hooks_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.GoleakOptions()...) }
