package lease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// scenario is one behaviour of issue 4's lease section, checked on every target with hash-field expiry.
// Each asserts the server state it leaves, through the env's raw client.
type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_contention_Concurrent", Run: testContention},
	{Name: "02_fields_independent", Run: testFieldsIndependent},
	{Name: "03_handoff_expiry", Run: testHandoffExpiry},
	{Name: "04_owner_isolation", Run: testOwnerIsolation},
	{Name: "05_other_field_untouched", Run: testOtherFieldUntouched},
	{Name: "06_expiring_hash_rejected", Run: testExpiringHash},
	{Name: "07_prefix_binary", Run: testPrefixBinary},
	{Name: "08_bad_input", Run: testBadInput},
	{Name: "09_inspect", Run: testInspect},
	{Name: "10_cancel_waiting_acquire", Run: testCancelWaiting},
	{Name: "11_release_outcomes", Run: testReleaseOutcomes},
	{Name: "12_noscript_recovery", Run: testNoScript},
	{Name: "13_no_revival_after_estimate", Run: testNoRevivalAfterEstimate},
	{Name: "14_ended_context", Run: testEndedContext},
	{Name: "15_untracked_no_expiry", Run: testUntrackedNoExpiry},
	{Name: "16_keepalive", Run: testKeepAlive},
	{Name: "17_any_field_wakes_waiters", Run: testAnyFieldWakes},
	{Name: "18_extend_ttl", Run: testExtendTTL},
	{Name: "19_any_field_wakes_every_waiter", Run: testAnyFieldWakesEvery},
	{Name: "20_foreign_type_with_expiry", Run: testForeignTypeWithExpiry},
	{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
}

// hasHashFieldTTL is the matrix's expectation: Redis 7.0 and Valkey 8 lack HPEXPIRE.
func hasHashFieldTTL(st matrix.Target) bool {
	return st.Server != testkit.Redis70 && st.Server != testkit.Valkey8
}

// proxiable reports whether st is a single server (a proxy can stand in front of it) with hash-field
// expiry.
func proxiable(st matrix.Target) bool { return st.Standalone() && hasHashFieldTTL(st) }

// TestLease runs every scenario on every target (targets in parallel, at most matrix.MaxParallelTargets at once;
// the scenarios of one target in order). On a server without hash-field expiry only the unsupported
// scenario runs.
func TestLease(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		has, err := luakit.Probe(ctx(t), e.Raw, luakit.HashFieldTTL)
		require.NoError(t, err)
		require.Equal(t, hasHashFieldTTL(st), has, "HPEXPIRE probe disagrees with the matrix")
		if !has {
			t.Run("00_unsupported", func(t *testing.T) { testUnsupported(t, e) })
			return
		}
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}
