package leader_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// TestLeaderOnSentinel runs the suite's scenarios that do not drive the server process on the
// Sentinel targets (matrix.SentinelTargets; candidates on rueidis Sentinel clients). Not run there,
// with the reason: paused_server_fails_over (pausing the primary makes the Sentinels fail it over),
// readonly_is_retried (it builds its own replica pair), release_is_sent_again (a proxy in front of
// one server address, which a Sentinel client does not use).
func TestLeaderOnSentinel(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, mt matrix.Target) {
		matrix.RunScenarios(t, mt, startEnv(t, mt), scenarios, nil)
	})
}

// TestLeaderSentinelFailover: what survives a Sentinel failover that lost writes. Candidate 0 leads a
// term whose acquisition was replicated; then replication is held, candidate 0 steps down and
// candidate 1 is elected on the primary alone (the next token). The Sentinels fail over to the
// replica, which never saw candidate 1's term: candidate 1's renewal finds no lease, so its term ends
// (it never leads on a server that does not know it), and the next term on the new primary is issued
// the same fencing token a second time: tokens are not globally monotonic across a failover that lost
// writes (the documented limit), while terms within one process still never overlap.
func TestLeaderSentinelFailover(t *testing.T) {
	for _, mt := range matrix.SentinelTargets() {
		t.Run(mt.Name, func(t *testing.T) {
			e := startEnv(t, mt)
			name, _, _ := election("sentinel-failover")
			rec := &recorder{}
			c0 := newCandidate(t, e, 0, name, rec, nil)
			c0.start()
			var first event
			waitFor(t, 10*time.Second, "candidate 0 leads", func() bool {
				for _, ev := range rec.snapshot() {
					first = ev
					return true
				}
				return false
			})
			require.NoError(t, e.Sentinel.WaitSync(ctx(t)))
			require.NoError(t, e.Sentinel.HoldReplication())
			require.NoError(t, c0.stop(t))
			c1 := newCandidate(t, e, 1, name, rec, nil)
			c1.start()
			lost := awaitNewTerm(t, rec, first.token, 10*time.Second)
			require.Equal(t, 1, lost.candidate)
			require.Equal(t, first.token+1, lost.token)

			_, err := e.Sentinel.Failover(ctx(t))
			require.NoError(t, err)
			// The lost term ends (its lease is not on the new primary), and the next term reuses its token.
			waitFor(t, 30*time.Second, "the lost term is revoked", func() bool {
				return !termOf(rec, lost.token).revoked.IsZero()
			})
			var again event
			waitFor(t, 30*time.Second, "a term after the failover", func() bool {
				evs := rec.snapshot()
				if len(evs) < 3 {
					return false
				}
				again = evs[len(evs)-1]
				return true
			})
			require.Equal(t, lost.token, again.token, "the lost term's token is issued a second time")
			require.True(t, termOf(rec, lost.token).revoked.Before(again.elected) || termOf(rec, lost.token).revoked.Equal(again.elected),
				"the lost term ended before the next began")
			require.NoError(t, c1.stop(t))
		})
	}
}
