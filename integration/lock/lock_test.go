package lock_test

import (
	"testing"
)

// scenario is one behaviour of issue 2, section 6, checked on every target (some skip where the issue
// says they apply only to Cluster or only to a standalone process server). Each asserts the server
// state it leaves, through the env's raw client.
type scenario struct {
	name string
	run  func(t *testing.T, e *env)
}

var scenarios = []scenario{
	{"01_contention_tokens_renewal", testContention},
	{"02_token_exact_above_2_53", testTokenAbove2p53},
	{"03_counter_overflow", testCounterOverflow},
	{"04_counter_unusable", testCounterUnusable},
	{"05_cluster_cross_slot", testClusterCrossSlot},
	{"06_prefix_binary_keys", testPrefixBinaryKeys},
	{"07_handoff_release", testHandoffRelease},
	{"08_handoff_expiry", testHandoffExpiry},
	{"09_cancel_waiting_acquire", testCancelWaiting},
	{"10_release_outcomes", testReleaseOutcomes},
	{"11_keepalive", testKeepAlive},
	{"12_server_restart", testServerRestart},
	{"13_fenced_stress", testFencedStress},
}

// TestLock runs every scenario on every target. Targets run in parallel (at most maxParallelTargets at
// once), each with its own server or cluster; the scenarios of one target run in order on it.
func TestLock(t *testing.T) {
	for _, st := range suiteTargets() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			targetSlots <- struct{}{}
			defer func() { <-targetSlots }()
			e := startEnv(t, st)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, e) })
			}
		})
	}
}
