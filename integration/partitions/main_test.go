// Package partitions_test runs network partitions between containers on a real Docker engine
// (testkit's container backend, docker network disconnect): redlock with a minority and a majority of
// its nodes partitioned away, a leader partitioned from its server while a rival still reaches it,
// and a Cluster primary partitioned from its replica and the rest of the cluster, then failed over.
//
// It runs in the container pass of `make test` (scripts/containers.sh, COORDKIT_TESTKIT_BACKEND=
// container). Under any other backend every test skips with that reason: partitions need containers
// on private networks.
package partitions_test

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

// TestMain fails the package when a goroutine outlives the tests (testkit.GoleakOptions: cluster
// clients' detached refresh goroutines).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}

// needContainers skips t unless the container backend is selected explicitly.
func needContainers(t *testing.T) {
	t.Helper()
	if strings.ToLower(strings.TrimSpace(os.Getenv(testkit.EnvBackend))) != testkit.BackendContainer {
		t.Skipf("partitions need containers on private networks: run with %s=%s (the container pass, scripts/containers.sh)", testkit.EnvBackend, testkit.BackendContainer)
	}
}
