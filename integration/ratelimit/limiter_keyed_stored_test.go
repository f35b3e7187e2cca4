package ratelimit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// limiterKeyedStoredScenarios returns the scenarios of this file.
func limiterKeyedStoredScenarios() []scenario {
	return []scenario{
		{Name: "limiter_keyed_gcra_stored_values", Run: testLimiterKeyedGCRAStored},
	}
}

// A keyed GCRA key holding this Keyed's own settings ("u<TAT>|<version>|g<burst>/<T>", the fast
// path of the decision) is decided from the stored TAT exactly; a value that only ends like it (an
// empty, non-numeric, negative, fractional or '|'-holding TAT part) is ErrForeignData with the value
// and its expiry unchanged.
func testLimiterKeyedGCRAStored(t *testing.T, e *env) {
	const suffix = "|0|g5/1000000" // version 0, burst 5, T = 1 s in µs
	p := ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second}
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, p, ratelimit.WithKeyPrefix(prefix))

	t.Run("own_settings", func(t *testing.T) {
		key := prefix + "own"
		tat := e.serverMicros(t, key) + 3_000_000 // 3 s of debt: 3 of 5 permits used
		stored := "u" + strconv.FormatInt(tat, 10) + suffix
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value(stored).Px(time.Minute).Build()).Error())
		res, err := k.AllowN(ctx(t), "own", 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, int64(1), res.Remaining, "decided from the stored TAT: 4 s of debt leave 1 permit")
		require.Equal(t, "u"+strconv.FormatInt(tat+1_000_000, 10)+suffix, e.dump(t, key)[""],
			"the stored TAT advanced by exactly one emission interval, settings kept")
	})

	for name, v := range map[string]string{
		"empty_tat":   "u" + suffix,
		"letters":     "uabc" + suffix,
		"bar_in_tat":  "u12|x" + suffix,
		"negative":    "u-5" + suffix,
		"fractional":  "u1.5" + suffix,
		"suffix_only": suffix,
	} {
		t.Run(name, func(t *testing.T) {
			key := prefix + name
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value(v).Px(time.Minute).Build()).Error())
			before := e.dump(t, key)
			_, err := k.AllowN(ctx(t), name, 1)
			require.ErrorIs(t, err, ratelimit.ErrForeignData, "stored %q", v)
			require.Equal(t, before, e.dump(t, key))
			require.Greater(t, e.PTTL(t, key), int64(50_000), "expiry kept")
		})
	}
}
