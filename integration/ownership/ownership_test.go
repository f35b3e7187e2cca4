package ownership_test

import (
	"testing"

	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// scenario is one row (or a few rows) of the contract in luakit/ownership/doc.go, run against every
// kind of handle.
type scenario struct {
	name string
	run  func(t *testing.T, e *env, k *kind)
	// unsupported: the scenario also runs for a kind the target cannot offer (it asserts the error
	// saying so); every other scenario skips such a kind.
	unsupported bool
}

var scenarios = []scenario{
	{name: "01_late_renewal_reply_surrenders", run: testLateRenewal},
	{name: "02_release_waits_for_inflight_renewal", run: testReleaseWaitsForRenewal},
	{name: "03_concurrent_release", run: testConcurrentRelease},
	{name: "04_release_with_cancelled_ctx", run: testReleaseCancelled},
	{name: "05_verify_without_holder", run: testVerifyLost},
	{name: "06_timed_out_acquire_cleaned_up_in_order", run: testCleanupInOrder},
	{name: "07_keepalive_stops_on_loss", run: testKeepAliveLoss},
	{name: "08_done_fixed_for_life", run: testDoneFixed},
	{name: "09_wait_woken_by_release", run: testWaitRelease},
	{name: "10_wait_woken_by_expiry", run: testWaitExpiry},
	{name: "11_wait_does_not_poll", run: testWaitNoPoll},
	{name: "12_uncertain_extend_keeps_handle", run: testUncertainExtend},
	{name: "13_errors_shared", run: testErrorsShared, unsupported: true},
	{name: "14_foreign_data", run: testForeignData},
	{name: "15_refused_connection_is_not_uncertain", run: testRefusedConnection},
	{name: "16_expiry_hand_off_never_before_deadline", run: testHandOffAfterDeadline},
	{name: "17_close", run: testClose},
	{name: "18_keepalive_follows_deadline", run: testKeepAliveSchedule},
	{name: "19_release_during_keepalive_renewal", run: testReleaseDuringKeepAlive},
}

// TestOwnership runs every scenario for every kind on every target: TestOwnership/<target>/<scenario>/
// <kind>. Targets run in parallel (matrix.TakeSlot bounds how many), each with its own servers; the
// scenarios of one target, and the kinds of one scenario, run one after another, because several
// pause the servers or count the commands they run.
func TestOwnership(t *testing.T) {
	matrix.RequireNamedOnce(t, scenarios, func(sc scenario) string { return sc.name })
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				for _, k := range kinds {
					// A kind the target does not offer (lease without hash-field expiry, redlock on
					// a cluster) is not part of that target's matrix: no subtest, except for the
					// scenario that asserts what its acquisition returns there.
					if why := k.needs(e); why != "" && !(sc.unsupported && k.unsupported != nil) {
						t.Logf("%s: not on this target (%s)", k.name, why)
						continue
					}
					t.Run(k.name, func(t *testing.T) { sc.run(t, e, k) })
				}
			})
		}
	})
}
