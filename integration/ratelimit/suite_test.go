package ratelimit_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// scenario is one behaviour checked on every target. Each file lists its scenarios in a function;
// scenarios joins them, sorted by name, so the name's prefix (engine_, limiter_, deny_, http_) groups
// them in the output.
type scenario = matrix.Scenario[*env]

// scenarios returns every scenario of the suite, sorted by name.
func scenarios() []scenario {
	list := slices.Concat(
		aclScenarios(),
		denyListCacheScenarios(),
		denyListScenarios(),
		engineCancelScenarios(),
		engineCompositeScenarios(),
		engineDefaultsScenarios(),
		engineExactScenarios(),
		engineForeignFormatScenarios(),
		engineMigrateScenarios(),
		engineWireScenarios(),
		httpMiddlewareScenarios(),
		httpRetryAfterTimeoutScenarios(),
		limiterConcurrencyScenarios(),
		limiterInFlightScenarios(),
		limiterInspectScenarios(),
		limiterKeyedScenarios(),
		limiterKeyedStoredScenarios(),
		limiterKeyedUpdateScenarios(),
		limiterKeyedWaitStoredScenarios(),
		limiterMetricsScenarios(),
		limiterObservedScenarios(),
		limiterQueueScenarios(),
		limiterRacesScenarios(),
		limiterResetRefundScenarios(),
		limiterUpdateScenarios(),
		limiterWaitScenarios(),
		queueOrderDenyCacheCloseStatsScenarios(),
		queueWakeupsMigrationSegmentsScenarios(),
	)
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

// TestRateLimit runs every scenario on every target. Targets run in parallel (at most
// matrix.MaxParallelTargets at once), each with its own server or cluster; scenarios of one target run in
// order on it, each on its own keys.
func TestRateLimit(t *testing.T) {
	list := scenarios()
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, list, nil)
	})
}
