package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engineDefaultsScenarios returns the scenarios of this file.
func engineDefaultsScenarios() []scenario {
	return []scenario{
		{Name: "engine_sliding_default_lateness", Run: engSlidingDefaultLateness},
	}
}

// engSlidingDefaultLateness: a sliding window with the default Segments releases a permit at most a
// tenth of the window late, so a rejection's RetryAfter never exceeds Window + Window/10 (with one
// segment it could approach twice the window). Reset of a request above the capacity (decided
// without the server) is 0, as documented, whatever the key's state.
func engSlidingDefaultLateness(t *testing.T, e *env) {
	const window = 10 * time.Second
	for i := range 3 {
		l := e.limiter(t, nil, e.key(t), ratelimit.SlidingWindow{Limit: 1, Window: window})
		res, err := l.Allow(ctx(t))
		require.NoError(t, err)
		require.True(t, res.Allowed)
		res, err = l.Allow(ctx(t))
		require.NoError(t, err)
		require.False(t, res.Allowed)
		require.Greater(t, res.RetryAfter, window-time.Second, "try %d", i)
		require.LessOrEqual(t, res.RetryAfter, window+window/10, "try %d: lateness above a tenth of the window", i)
		require.Positive(t, res.Reset)

		res, err = l.AllowN(ctx(t), 2)
		require.NoError(t, err)
		require.False(t, res.Allowed)
		require.Zero(t, res.Reset, "decided without the server: Reset unknown (0)")
		require.True(t, res.At.IsZero())
	}
}
