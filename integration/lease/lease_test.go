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
type scenario struct {
	name string
	run  func(t *testing.T, e *env)
}

var scenarios = []scenario{
	{"01_contention_Concurrent", testContention},
	{"02_fields_independent", testFieldsIndependent},
	{"03_handoff_expiry", testHandoffExpiry},
	{"04_owner_isolation", testOwnerIsolation},
	{"05_other_field_untouched", testOtherFieldUntouched},
	{"06_expiring_hash_rejected", testExpiringHash},
	{"07_prefix_binary", testPrefixBinary},
	{"08_bad_input", testBadInput},
	{"09_holders", testHolders},
	{"10_cancel_waiting_acquire", testCancelWaiting},
	{"11_release_outcomes", testReleaseOutcomes},
	{"12_noscript_recovery", testNoScript},
	{"13_no_revival_after_estimate", testNoRevivalAfterEstimate},
	{"14_ended_context", testEndedContext},
	{"15_untracked_no_expiry", testUntrackedNoExpiry},
	{"16_keepalive", testKeepAlive},
	{"17_any_field_wakes_waiters", testAnyFieldWakes},
	{"18_extend_ttl", testExtendTTL},
	{"19_any_field_wakes_every_waiter", testAnyFieldWakesEvery},
	{"20_foreign_type_with_expiry", testForeignTypeWithExpiry},
	{"90_least_privilege_acl", testLeastPrivilege},
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
	matrix.RequireNamedOnce(t, scenarios, func(sc scenario) string { return sc.name })
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		has, err := luakit.Probe(ctx(t), e.Raw, luakit.HashFieldTTL)
		require.NoError(t, err)
		require.Equal(t, hasHashFieldTTL(st), has, "HPEXPIRE probe disagrees with the matrix")
		if !has {
			t.Run("00_unsupported", func(t *testing.T) { testUnsupported(t, e) })
			return
		}
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) { sc.run(t, e) })
		}
	})
}
