package ratelimit_test

import (
	"sort"
	"sync"
	"testing"

	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// scenario is one behaviour checked on every target. Files register their scenarios in init with
// register; TestRateLimit runs them sorted by name, so the name's prefix (engine_, limiter_, deny_,
// http_) groups them in the output.
type scenario struct {
	name string
	run  func(t *testing.T, e *env)
	// standaloneOnly scenarios are not registered on a cluster target (they drive one server
	// process).
	standaloneOnly bool
}

var (
	scenariosMu sync.Mutex
	scenarios   []scenario
)

func register(sc ...scenario) {
	scenariosMu.Lock()
	defer scenariosMu.Unlock()
	scenarios = append(scenarios, sc...)
}

// TestRateLimit runs every scenario on every target. Targets run in parallel (at most
// matrix.MaxParallelTargets at once), each with its own server or cluster; scenarios of one target run in
// order on it, each on its own keys.
func TestRateLimit(t *testing.T) {
	list := append([]scenario(nil), scenarios...)
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		for _, sc := range list {
			if sc.standaloneOnly && st.Cluster {
				continue
			}
			t.Run(sc.name, func(t *testing.T) { sc.run(t, e) })
		}
	})
}
