package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engineLegacySegmentsScenarios returns the scenarios of this file.
func engineLegacySegmentsScenarios() []scenario {
	return []scenario{
		{Name: "engine_legacy_ms_composite_default_segments", Run: engLegacyCompositeDefaultSegments},
	}
}

// engLegacyCompositeDefaultSegments: the one exception to "state of earlier builds matches the same
// settings" (README). Earlier builds read a SlidingWindow's Segments 0 as 1 segment and recorded that
// in a composite's signature; this build's Segments 0 is DefaultSegments, other settings: a Limiter
// gets ErrConfigMismatch (AllowN, WaitN, Inspect; nothing written), a Limiter with Segments 1
// matches and can migrate the key to the new settings once, and a Keyed converts the key.
func engLegacyCompositeDefaultSegments(t *testing.T, e *env) {
	comp := func(segments int) ratelimit.Composite {
		return ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
			ratelimit.SlidingWindow{Limit: 10, Window: time.Minute, Segments: segments},
		}}
	}
	seed := func(t *testing.T, key string) {
		now := e.serverMillis(t, key)
		engSeedRaw(t, e, key, map[string]string{"L": "cp", "S": "v1|f5/3600000|s10/60000/1",
			"0.n": "2", "0.e": engI(now + 1800000), "1:" + engI(now+30000): "3"}, now+1800000)
	}
	t.Run("limiter", func(t *testing.T) {
		key := e.key(t)
		seed(t, key)
		stored := e.dump(t, key)
		l0 := e.limiter(t, nil, key, comp(0))
		_, err := l0.AllowN(ctx(t), 1)
		require.ErrorIs(t, err, ratelimit.ErrConfigMismatch)
		_, err = l0.WaitN(ctx(t), 1)
		require.ErrorIs(t, err, ratelimit.ErrConfigMismatch)
		_, err = l0.Inspect(ctx(t))
		require.ErrorIs(t, err, ratelimit.ErrConfigMismatch)
		require.Equal(t, stored, e.dump(t, key), "nothing written")

		l1 := e.limiter(t, nil, key, comp(1))
		res, err := l1.AllowN(ctx(t), 0)
		require.NoError(t, err, "Segments 1 is what the earlier build stored")
		require.Equal(t, int64(3), res.Remaining)
		require.NoError(t, l1.Update(ctx(t), comp(0), ratelimit.Migrate))
		res, err = l0.AllowN(ctx(t), 1)
		require.NoError(t, err, "migrated to the new settings")
		require.True(t, res.Allowed)
		require.Equal(t, int64(2), res.Remaining, "5 - 2 - 1 in the fixed window")
		require.Equal(t, engSignature(t, comp(0)), e.dump(t, key)["S"])
	})
	t.Run("keyed", func(t *testing.T) {
		prefix := e.key(t) + ":"
		seed(t, prefix+"c")
		k := limKeyed(t, e, comp(0), ratelimit.WithKeyPrefix(prefix))
		res, err := k.AllowN(ctx(t), "c", 1)
		require.NoError(t, err, "a Keyed converts other stored settings")
		require.True(t, res.Allowed)
		require.Equal(t, int64(2), res.Remaining)
		require.Equal(t, engSignature(t, comp(0)), e.dump(t, prefix+"c")["S"])
	})
}
