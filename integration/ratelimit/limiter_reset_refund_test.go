package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// limiterResetRefundScenarios returns the scenarios of this file.
func limiterResetRefundScenarios() []scenario {
	return []scenario{
		{Name: "limiter_reset_refund", Run: limResetRefund},
	}
}

// limResetRefund: Reset deletes the state (full capacity again), Refund gives exactly n permits
// back (never above the capacity), each in one script; sliding windows refuse refunds before any
// I/O; a composite refund checks the stored signature; a key of another layout is ErrForeignData
// with nothing changed.
func limResetRefund(t *testing.T, e *env) {
	for name, p := range map[string]ratelimit.Policy{
		"fixed":  ratelimit.FixedWindow{Limit: 3, Window: time.Hour},
		"bucket": ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Hour},
		"gcra":   ratelimit.GCRA{Burst: 3, EmissionInterval: time.Hour},
		"composite": ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour},
			ratelimit.FixedWindow{Limit: 3, Window: time.Hour},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			key := e.key(t)
			c := e.NewClient(t, nil, matrix.NoCache)
			l := e.limiter(t, c, key, p)
			remaining := func() int64 {
				t.Helper()
				in, err := l.Inspect(ctx(t))
				require.NoError(t, err)
				return in.Remaining
			}
			require.NoError(t, l.Refund(ctx(t), 1), "absent key: nothing owed")
			require.False(t, e.exists(t, key))
			limExhaust(t, l, 3)
			require.Zero(t, remaining())
			before := limScripts(t, e)
			require.NoError(t, l.Refund(ctx(t), 2))
			require.Equal(t, int64(1), limScripts(t, e)-before, "one script")
			require.Equal(t, int64(2), remaining())
			require.NoError(t, l.Refund(ctx(t), 10))
			require.Equal(t, int64(3), remaining(), "never above the capacity")
			limExhaust(t, l, 3)

			before = limScripts(t, e)
			require.NoError(t, l.Reset(ctx(t)))
			require.Equal(t, int64(1), limScripts(t, e)-before, "one script")
			require.False(t, e.exists(t, key))
			require.Equal(t, int64(3), remaining())
			require.NoError(t, l.Reset(ctx(t)), "absent key")

			kd, err := ratelimit.NewKeyed(c, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, kd.Close(context.Background())) }()
			res, err := kd.AllowN(ctx(t), key, 3)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.NoError(t, kd.Refund(ctx(t), key, 1))
			require.Equal(t, int64(1), remaining())
			require.NoError(t, kd.Reset(ctx(t), key))
			require.False(t, e.exists(t, key))
		})
	}
	t.Run("sliding refund unsupported", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, ratelimit.SlidingWindow{Limit: 3, Window: time.Hour})
		limExhaust(t, l, 3)
		state := e.dump(t, key)
		before := limScripts(t, e)
		require.ErrorIs(t, l.Refund(ctx(t), 1), ratelimit.ErrRefundUnsupported)
		require.Equal(t, before, limScripts(t, e), "rejected before any I/O")
		require.NoError(t, l.Reset(ctx(t)))
		require.False(t, e.exists(t, key), "Reset works for every algorithm")
		require.NotNil(t, state)
	})
	t.Run("composite signature", func(t *testing.T) {
		// A refund compares the stored composite signature: another one is ErrConfigMismatch for a
		// Limiter and refunds nothing for a Keyed (no error); the same one refunds.
		mk := func(limit int64) ratelimit.Policy {
			return ratelimit.Composite{Components: []ratelimit.Component{
				ratelimit.FixedWindow{Limit: limit, Window: time.Hour},
				ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour},
			}}
		}
		prefix := e.key(t) + ":"
		key := prefix + "c"
		l := e.limiter(t, nil, key, mk(3))
		limExhaust(t, l, 3)
		state := e.dump(t, key)
		other := e.limiter(t, nil, key, mk(4))
		require.ErrorIs(t, other.Refund(ctx(t), 1), ratelimit.ErrConfigMismatch)
		require.NoError(t, limKeyed(t, e, mk(4), ratelimit.WithKeyPrefix(prefix)).Refund(ctx(t), "c", 1))
		require.Equal(t, state, e.dump(t, key), "nothing refunded under another signature")
		require.NoError(t, limKeyed(t, e, mk(3), ratelimit.WithKeyPrefix(prefix)).Refund(ctx(t), "c", 1))
		require.Equal(t, "2", e.dump(t, key)["0.n"], "the Keyed with the stored signature refunds")
		require.NoError(t, l.Refund(ctx(t), 1))
		require.Equal(t, "1", e.dump(t, key)["0.n"], "the Limiter with the stored signature refunds")
	})
	t.Run("foreign data", func(t *testing.T) {
		key := e.key(t)
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("x").Build()).Error())
		fw := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 3, Window: time.Hour})
		require.ErrorIs(t, fw.Reset(ctx(t)), ratelimit.ErrForeignData)
		require.ErrorIs(t, fw.Refund(ctx(t), 1), ratelimit.ErrForeignData)
		g := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 3, EmissionInterval: time.Hour})
		require.ErrorIs(t, g.Reset(ctx(t)), ratelimit.ErrForeignData)
		require.True(t, e.exists(t, key), "nothing deleted")
	})
}
