package hooks_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/testkit"
)

// env is one running target of the matrix, shared by the hook scenarios that run on it one after
// another (each on keys of its own), so a scenario's command counts see only its own traffic.
type env struct {
	*matrix.Env
	target matrix.Target
}

// client returns a new client of the target (client-side caching on), closed at t's cleanup.
func (e *env) client(t *testing.T) rueidis.Client {
	t.Helper()
	if e.IsCluster() {
		return e.Cluster.Client(t)
	}
	return e.Srv.Client(t)
}

// hasHashFieldTTL: the lease primitive needs HPEXPIRE (Redis 7.4+, Valkey 9+); the matrix's Redis 7.0
// and Valkey 8 lack it.
func hasHashFieldTTL(mt matrix.Target) bool {
	return mt.Server != testkit.Redis70 && mt.Server != testkit.Valkey8
}

// scenario is one hook rule (or group of rules) checked on a target.
type scenario struct {
	name string
	run  func(t *testing.T, e *env)
	// needsHashFieldTTL: skipped on a target without hash-field expiry (the lease primitive).
	needsHashFieldTTL bool
	// standaloneOnly: skipped on a cluster (redlock runs on independent standalone servers).
	standaloneOnly bool
}

var scenarios = []scenario{
	{name: "lock_rules", run: testLockHookRules},
	{name: "lock_owed_cleanup_not_admitted", run: testLockOwedCleanupNotAdmitted},
	{name: "compose_in_order", run: testHooksComposeInOrder, needsHashFieldTTL: true},
	{name: "redlock_rules", run: testRedlockHookRules, standaloneOnly: true},
	{name: "rate_limit_rules", run: testRateLimitHookRules},
	{name: "idempotency", run: testIdempotencyHooks},
	{name: "idemhttp_outcomes", run: testIdemhttpOutcomes},
	{name: "idemhttp_store_down", run: testIdemhttpStoreDown},
	{name: "ratelimithttp_decisions", run: testRateLimitHTTPDecisions},
	{name: "latch", run: testLatchHooks},
	{name: "counter", run: testCounterHooks},
	{name: "leader_is_leader_gauge", run: testLeaderIsLeaderGauge},
	{name: "leader_rejected_campaign", run: testLeaderRejectedCampaign},
	{name: "leader_rejected_renew", run: testLeaderRejectedRenew},
	{name: "leader_rejected_resign", run: testLeaderRejectedResign},
	{name: "otel_lock_spans", run: testLockSpansAndDurations},
	{name: "semaphore", run: testSemaphoreHooks},
	{name: "rwlock_rejected_close", run: testRWLockRejectedClose},
}

// TestHooks runs every hook scenario on every target of the matrix (targets in parallel, at most
// matrix.MaxParallelTargets at once; the scenarios of one target in order), skipping those the
// target cannot run.
func TestHooks(t *testing.T) {
	matrix.RequireNamedOnce(t, scenarios, func(sc scenario) string { return sc.name })
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := &env{Env: matrix.StartEnv(t, mt), target: mt}
		for _, sc := range scenarios {
			if sc.needsHashFieldTTL && !hasHashFieldTTL(mt) || sc.standaloneOnly && mt.Cluster {
				continue
			}
			t.Run(sc.name, func(t *testing.T) { sc.run(t, e) })
		}
	})
}

// exists reports whether key exists, read with c.
func exists(t *testing.T, c rueidis.Client, key string) bool {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}
