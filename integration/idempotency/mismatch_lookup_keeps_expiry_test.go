package idempotency_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
)

// testMismatchKeepsExpiry: a lookup with another fingerprint neither lengthens nor shortens the claim's
// expiry, pending or completed: the lookups pass leases far longer and far shorter than the claim's, so a
// refresh to either would show in PTTL; the hash is unchanged.
func testMismatchKeepsExpiry(t *testing.T, e *env) {
	const (
		claim     = 10 * time.Minute
		retention = 20 * time.Minute
	)
	s := e.store(t)
	key := "ck:idem:mismatch-expiry"
	a := begin(t, s, key, claim, fpA)
	requireState(t, a, idempotency.Started)
	pending := e.hash(t, key)
	for _, lease := range []time.Duration{time.Hour, time.Second} {
		requireState(t, begin(t, s, key, lease, fpB), idempotency.FingerprintMismatch)
		p := e.PTTL(t, key)
		require.True(t, p > (claim-time.Minute).Milliseconds() && p <= claim.Milliseconds(),
			"pending claim PTTL %dms after a mismatch lookup with lease %v: must stay the claim's %v", p, lease, claim)
		require.Equal(t, pending, e.hash(t, key), "the hash is unchanged")
	}

	ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("result"), retention)
	require.NoError(t, err)
	require.True(t, ok)
	completed := e.hash(t, key)
	for _, lease := range []time.Duration{time.Hour, time.Second} {
		requireState(t, begin(t, s, key, lease, fpB), idempotency.FingerprintMismatch)
		p := e.PTTL(t, key)
		require.True(t, p > (retention-time.Minute).Milliseconds() && p <= retention.Milliseconds(),
			"completed PTTL %dms after a mismatch lookup with lease %v: must stay the retention %v", p, lease, retention)
		require.Equal(t, completed, e.hash(t, key), "the hash is unchanged")
	}
}
