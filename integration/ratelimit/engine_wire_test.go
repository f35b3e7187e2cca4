package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// engineWireScenarios returns the scenarios of this file.
func engineWireScenarios() []scenario {
	return []scenario{
		{Name: "engine_round_trips", Run: engRoundTrips},
		{Name: "engine_keys", Run: engKeys},
		{Name: "engine_uncertain_after_send", Run: engUncertain, StandaloneOnly: true},
	}
}

// engPolicies is one policy per layout.
var engPolicies = map[string]ratelimit.Policy{
	"fixed":   ratelimit.FixedWindow{Limit: 100, Window: time.Hour},
	"sliding": ratelimit.SlidingWindow{Limit: 100, Window: time.Hour, Segments: 10},
	"bucket":  ratelimit.TokenBucket{Limit: 100, TokensPerPeriod: 1, Period: time.Hour},
	"gcra":    ratelimit.GCRA{Burst: 100, EmissionInterval: time.Second},
	"composite": ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 100, TokensPerPeriod: 1, Period: time.Hour},
		ratelimit.SlidingWindow{Limit: 100, Window: time.Hour, Segments: 10},
		ratelimit.FixedWindow{Limit: 100, Window: time.Hour},
	}},
}

// engRoundTrips: every decision is one EVALSHA; on a server whose script cache was flushed the first
// decision is an EVALSHA answered NOSCRIPT followed by one EVAL (two round trips, measured), and the
// next ones are single EVALSHAs again.
func engRoundTrips(t *testing.T, e *env) {
	for name, p := range engPolicies {
		t.Run(name, func(t *testing.T) {
			key := e.key(t)
			l := e.limiter(t, nil, key, p)
			for _, n := range e.Nodes {
				_, err := n.Do(ctx(t), "SCRIPT", "FLUSH")
				require.NoError(t, err)
			}
			before := e.CommandStats(t)
			res, err := l.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			d := e.CommandsSince(t, before)
			sha, eval := d["evalsha"], d["eval"]
			t.Logf("first decision after SCRIPT FLUSH: %d EVALSHA + %d EVAL", sha, eval)
			require.Equal(t, int64(1), eval, "the NOSCRIPT fallback sends the source once")
			require.LessOrEqual(t, sha, int64(1))

			const decisions = 20
			before = e.CommandStats(t)
			for i := range decisions {
				_, err := l.AllowN(ctx(t), int64(i%3))
				require.NoError(t, err)
			}
			d = e.CommandsSince(t, before)
			require.Equal(t, int64(decisions), d["evalsha"], "one EVALSHA per decision")
			require.Zero(t, d["eval"])
		})
	}
}

// engKeys: key prefixes and binary keys (NUL bytes, invalid UTF-8) are used as given, one key per
// limiter and no hash tag (so any key works on a Cluster).
func engKeys(t *testing.T, e *env) {
	const prefix = "pre\x00fix:"
	for name, p := range engPolicies {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"bin\x00key", "bad\xff\xfeutf8", "\xc3\x28", "{" + name} {
				key := e.key(t) + k
				l := e.limiter(t, nil, key, p, ratelimit.WithKeyPrefix(prefix))
				require.Equal(t, key, l.Key(), "Key is the key as given, without the prefix")
				res, err := l.AllowN(ctx(t), 3)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.True(t, e.exists(t, prefix+key), "state at the prefixed key")
				require.False(t, e.exists(t, key), "nothing at the unprefixed key")
				// A second limiter on the same physical key sees the usage.
				res, err = e.limiter(t, nil, prefix+key, p).AllowN(ctx(t), 0)
				require.NoError(t, err)
				require.Equal(t, int64(97), res.Remaining)
			}
		})
	}
}

// engUncertain: a decision whose reply never arrives (the server is paused after the script was sent)
// fails with ErrUncertain: the permits may or may not have been consumed, never partly.
func engUncertain(t *testing.T, e *env) {
	key := e.key(t)
	// One connection (matrix.OneConn), so the decision is sent, not waiting to dial.
	l := e.limiter(t, e.NewClient(t, nil, matrix.NoCache, matrix.OneConn), key, ratelimit.FixedWindow{Limit: 5, Window: time.Hour})
	_, err := l.AllowN(ctx(t), 1) // connected, scripts loaded
	require.NoError(t, err)
	e.Srv.MustPause(t)
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	_, err = l.AllowN(c, 2)
	cancel()
	e.Srv.MustResume(t)
	require.ErrorIs(t, err, ratelimit.ErrUncertain)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	res, err := l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Contains(t, []int64{4, 2}, res.Remaining, "all or nothing of the uncertain request")
	t.Logf("the uncertain request was applied: %v", res.Remaining == 2)
}
