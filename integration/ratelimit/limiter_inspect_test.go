package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// limiterInspectScenarios returns the scenarios of this file.
func limiterInspectScenarios() []scenario {
	return []scenario{
		{Name: "limiter_inspect_read_only", Run: limInspectReadOnly},
		{Name: "limiter_inspect_exists", Run: limInspectExists},
		{Name: "deny_entries_read_only", Run: denyEntriesReadOnly},
	}
}

// limInspectReadOnly: Inspect reports the state a one-permit request would find, through one
// EVALSHA_RO (commandstats), and leaves the state, its expiry (PTTL) and the write counters as they
// were, for every algorithm, on an absent, a partly used and an exhausted key.
func limInspectReadOnly(t *testing.T, e *env) {
	policies := map[string]ratelimit.Policy{
		"fixed":   ratelimit.FixedWindow{Limit: 2, Window: time.Hour},
		"sliding": ratelimit.SlidingWindow{Limit: 2, Window: time.Hour, Segments: 60},
		"bucket":  ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Hour},
		"gcra":    ratelimit.GCRA{Burst: 2, EmissionInterval: time.Hour},
		"composite": ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour},
			ratelimit.SlidingWindow{Limit: 2, Window: time.Hour, Segments: 10},
		}},
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			key := e.key(t)
			c := e.NewClient(t, nil, matrix.NoCache)
			l := e.limiter(t, c, key, p)
			kd, err := ratelimit.NewKeyed(c, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, kd.Close(ctx(t))) }()

			inspect := func(wantRemaining int64, wantRetry bool) {
				t.Helper()
				state, pttl := e.dump(t, key), e.PTTL(t, key)
				before := e.CommandStats(t)
				in, err := l.Inspect(ctx(t))
				require.NoError(t, err)
				d := e.CommandsSince(t, before)
				require.Equal(t, int64(1), d["evalsha_ro"]+d["eval_ro"], "one read-only script")
				require.Zero(t, d["evalsha"]+d["eval"], "no writable script")
				require.Equal(t, state, e.dump(t, key), "Inspect changed the state")
				got := e.PTTL(t, key)
				if pttl < 0 {
					require.Equal(t, pttl, got, "Inspect changed the expiry")
				} else {
					require.InDelta(t, pttl, got, 1000, "Inspect changed the expiry")
					require.LessOrEqual(t, got, pttl, "Inspect extended the expiry")
				}
				require.Equal(t, wantRemaining, in.Remaining)
				require.Equal(t, state != nil, in.Exists, "Exists")
				require.Equal(t, int64(2), in.Limit)
				require.Equal(t, wantRetry, in.RetryAfter > 0, "RetryAfter %v", in.RetryAfter)
				require.Equal(t, key, in.Key)
				require.Equal(t, p, in.Policy)
				require.False(t, in.At.IsZero())
				require.WithinDuration(t, time.Now(), in.At, time.Minute)
				if wantRemaining == 2 {
					require.Zero(t, in.Reset)
				} else {
					require.Positive(t, in.Reset)
				}
				kin, err := kd.Inspect(ctx(t), key)
				require.NoError(t, err)
				require.Equal(t, in.Remaining, kin.Remaining, "Keyed.Inspect sees the same state")
				require.Equal(t, in.Exists, kin.Exists, "Keyed.Inspect sees the same state")
				require.Zero(t, kd.KeyCount(), "Keyed.Inspect created local state")
			}
			// Load the script first (the first EVALSHA_RO after a restart replies NOSCRIPT and is
			// followed by EVAL_RO: two calls), on the node serving key: on a cluster another key can
			// live on another node, whose script cache this would not fill.
			_, err = kd.Inspect(ctx(t), key)
			require.NoError(t, err)
			inspect(2, false)
			require.False(t, e.exists(t, key), "Inspect created the key")
			_, err = l.Allow(ctx(t))
			require.NoError(t, err)
			inspect(1, false)
			_, err = l.Allow(ctx(t))
			require.NoError(t, err)
			inspect(0, true)
			require.Equal(t, ratelimit.Stats{Granted: 2, Available: 0}, l.Stats(), "Inspect is not counted")
		})
	}
	t.Run("errors", func(t *testing.T) {
		key := e.key(t)
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("x").Build()).Error())
		l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 1, EmissionInterval: time.Second})
		_, err := l.Inspect(ctx(t))
		require.ErrorIs(t, err, ratelimit.ErrForeignData)
		kd, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), ratelimit.GCRA{Burst: 1, EmissionInterval: time.Second})
		require.NoError(t, err)
		_, err = kd.Inspect(ctx(t), "")
		require.ErrorIs(t, err, ratelimit.ErrInvalidConfig)
		require.NoError(t, kd.Close(ctx(t)))
		_, err = kd.Inspect(ctx(t), key)
		require.ErrorIs(t, err, ratelimit.ErrClosed)
		require.NoError(t, l.Close(ctx(t)))
		_, err = l.Inspect(ctx(t))
		require.ErrorIs(t, err, ratelimit.ErrClosed)
	})
}

// limInspectExists: Inspect tells an absent key (Exists false) from a key that holds state at full
// capacity (a fixed window whose one admission was refunded: Exists true), both with Remaining equal
// to Limit, in one read-only script; a probe (AllowN(0)) of an absent key is allowed and writes
// nothing.
func limInspectExists(t *testing.T, e *env) {
	for name, p := range map[string]ratelimit.Policy{
		"fixed":  ratelimit.FixedWindow{Limit: 2, Window: time.Hour},
		"bucket": ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Hour},
		"composite": ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 2, Window: time.Hour},
			ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Hour},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := e.key(t) + ":"
			key := prefix + "k"
			l := e.limiter(t, nil, key, p)
			k := limKeyed(t, e, p, ratelimit.WithKeyPrefix(prefix))
			res, err := l.AllowN(ctx(t), 0)
			require.NoError(t, err)
			require.True(t, res.Allowed, "a probe of an absent key is allowed")
			require.False(t, e.exists(t, key), "a probe wrote")
			res, err = k.AllowN(ctx(t), "k", 0)
			require.NoError(t, err)
			require.True(t, res.Allowed, "a keyed probe of an absent key is allowed")
			require.False(t, e.exists(t, key), "a keyed probe wrote")
			in, err := l.Inspect(ctx(t))
			require.NoError(t, err)
			require.False(t, in.Exists)
			require.Equal(t, int64(2), in.Remaining)
			kin, err := k.Inspect(ctx(t), "k")
			require.NoError(t, err)
			require.False(t, kin.Exists)

			_, err = l.Allow(ctx(t))
			require.NoError(t, err)
			require.NoError(t, l.Refund(ctx(t), 1))
			require.True(t, e.exists(t, key))
			in, err = l.Inspect(ctx(t))
			require.NoError(t, err)
			require.True(t, in.Exists, "state at full capacity exists")
			require.Equal(t, int64(2), in.Remaining)
			kin, err = k.Inspect(ctx(t), "k")
			require.NoError(t, err)
			require.True(t, kin.Exists)
		})
	}
	t.Run("gcra", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 2, EmissionInterval: time.Hour})
		in, err := l.Inspect(ctx(t))
		require.NoError(t, err)
		require.False(t, in.Exists)
		require.Equal(t, int64(2), in.Remaining)
		_, err = l.Allow(ctx(t))
		require.NoError(t, err)
		in, err = l.Inspect(ctx(t))
		require.NoError(t, err)
		require.True(t, in.Exists)
		require.Equal(t, int64(1), in.Remaining)
	})
}

// denyEntriesReadOnly: Inspect lists the members sorted with the key's remaining life, through one
// EVALSHA_RO, leaving the set and its TTL unchanged; an absent key does not exist; another type is
// ErrForeignData.
func denyEntriesReadOnly(t *testing.T, e *env) {
	key := e.key(t)
	dl := denyList(t, e.NewClient(t, nil, matrix.NoCache), key)
	got, err := dl.Inspect(ctx(t))
	require.NoError(t, err)
	require.Equal(t, denylist.Inspection{}, got)
	denySet(t, dl, "b", true)
	denySet(t, dl, "a", true)
	denySet(t, dl, "c\x00", true)
	got, err = dl.Inspect(ctx(t))
	require.NoError(t, err)
	require.Equal(t, denylist.Inspection{Exists: true, Identities: []string{"a", "b", "c\x00"}, NoExpiry: true}, got)

	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Pexpire().Key(key).Milliseconds(3_600_000).Build()).Error())
	pttl := e.PTTL(t, key)
	_, err = dl.Inspect(ctx(t)) // the script is loaded now (see limInspectReadOnly)
	require.NoError(t, err)
	before := e.CommandStats(t)
	got, err = dl.Inspect(ctx(t))
	require.NoError(t, err)
	d := e.CommandsSince(t, before)
	require.Equal(t, int64(1), d["evalsha_ro"]+d["eval_ro"])
	require.Zero(t, d["sadd"]+d["srem"]+d["evalsha"])
	require.Len(t, got.Identities, 3)
	require.False(t, got.NoExpiry)
	require.InDelta(t, time.Duration(pttl)*time.Millisecond, got.Remaining, float64(2*time.Second))
	require.LessOrEqual(t, e.PTTL(t, key), pttl, "Inspect extended the TTL")
	require.Positive(t, e.PTTL(t, key))

	other := e.key(t)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(other).Value("x").Build()).Error())
	_, err = denyList(t, e.NewClient(t, nil, matrix.NoCache), other).Inspect(ctx(t))
	require.ErrorIs(t, err, ratelimit.ErrForeignData)
}
