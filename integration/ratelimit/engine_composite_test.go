package ratelimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// engCompositeCase is the exactness table of a composite policy (one of engExactCases).
var engCompositeCase = engCase{
	name: "composite",
	policy: ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: 100 * time.Millisecond},
		ratelimit.SlidingWindow{Limit: 6, Window: 600 * time.Millisecond, Segments: 3},
		ratelimit.FixedWindow{Limit: 8, Window: time.Second},
	}},
	steps: []engStep{
		{0, 3, "every component consumes"},
		{0, 1, "the bucket is empty: it controls (lowest remaining)"},
		{0, 1, "rejected by the bucket only: RetryAfter is its refill"},
		{0, 4, "n = capacity (the bucket's limit): RetryAfter four periods"},
		{0, 5, "above the smallest capacity: local"},
		{100, 1, "bucket refilled one"},
		{200, 1, "the sliding window is full now"},
		{250, 1, "rejected by two components: RetryAfter is the maximum"},
		{250, 0, "probe writes nothing"},
		{1100, 2, "the fixed window ended; a new one starts"},
	},
}

// engineCompositeScenarios returns the scenarios of this file.
func engineCompositeScenarios() []scenario {
	return []scenario{
		{Name: "engine_composite_rejection_consumes_nothing", Run: engCompositeRejection},
		{Name: "engine_composite_signature_mismatch", Run: engCompositeMismatch},
		{Name: "engine_foreign_data", Run: engForeignData},
	}
}

// engCompositeRejection: when one component rejects, no component consumes (the stored hash is
// byte for byte unchanged), and RetryAfter is the maximum over the components.
func engCompositeRejection(t *testing.T, e *env) {
	key := e.key(t)
	p := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 3 * time.Hour},
		ratelimit.FixedWindow{Limit: 2, Window: 2 * time.Hour},
		ratelimit.SlidingWindow{Limit: 5, Window: time.Hour, Segments: 4},
	}}
	l := e.limiter(t, nil, key, p)
	first, err := l.AllowN(ctx(t), 2)
	require.NoError(t, err)
	require.True(t, first.Allowed)
	require.Zero(t, first.Remaining)
	require.Equal(t, 1, first.Component, "the fixed window has the lowest remaining")
	require.Equal(t, int64(2), first.Limit)
	before := e.dump(t, key)
	require.Equal(t, engSignature(t, p), before["S"])
	require.Equal(t, "1", before["0.t"], "the bucket consumed")
	require.Equal(t, "2", before["1.n"], "the fixed window consumed")
	end, refill := engInt(before, "1.e"), engInt(before, "0.r")

	// The bucket and the sliding window would admit one permit; the fixed window rejects it.
	res, err := l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "%+v", res)
	require.False(t, res.At.IsZero(), "%+v", res)
	require.Equal(t, before, e.dump(t, key), "a rejection by one component consumed from another")
	require.Equal(t, time.Duration(end-res.At.UnixMicro())*time.Microsecond, res.RetryAfter, "the fixed window's end")
	require.Equal(t, 1, res.Component)

	// Two permits: the bucket (a refill in three hours) and the fixed window (its end in two) both
	// reject; RetryAfter is the later one, the bucket's.
	res, err = l.AllowN(ctx(t), 2)
	require.NoError(t, err)
	require.False(t, res.Allowed, "%+v", res)
	require.False(t, res.At.IsZero(), "%+v", res)
	require.Equal(t, time.Duration(refill+3*3600*1000000-res.At.UnixMicro())*time.Microsecond, res.RetryAfter, "the bucket's refill")
	require.Equal(t, before, e.dump(t, key))
}

// engCompositeMismatch: a composite whose stored signature differs fails with ErrConfigMismatch
// without consuming, for decisions and probes alike; standalone layouts record no signature.
func engCompositeMismatch(t *testing.T, e *env) {
	key := e.key(t)
	a := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
		ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Minute},
	}}
	b := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 6, Window: time.Hour},
		ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Minute},
	}}
	la := e.limiter(t, nil, key, a)
	lb := e.limiter(t, nil, key, b)
	res, err := la.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	before := e.dump(t, key)
	require.Equal(t, engSignature(t, a), before["S"])
	for _, n := range []int64{1, 0, 3} {
		_, err = lb.AllowN(ctx(t), n)
		require.ErrorIs(t, err, ratelimit.ErrConfigMismatch, "n=%d", n)
		require.Equal(t, before, e.dump(t, key), "a mismatched decision wrote (n=%d)", n)
	}
	// The matching limiter still works.
	res, err = la.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, "2", e.dump(t, key)["0.n"])

	// Standalone layouts carry no signature: two fixed windows with other limits share a key.
	skey := e.key(t)
	s1 := e.limiter(t, nil, skey, ratelimit.FixedWindow{Limit: 5, Window: time.Hour})
	s2 := e.limiter(t, nil, skey, ratelimit.FixedWindow{Limit: 2, Window: time.Hour})
	_, err = s1.AllowN(ctx(t), 2)
	require.NoError(t, err)
	res, err = s2.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the second limiter sees the first one's usage")
	require.NotContains(t, e.dump(t, skey), "S")
}

// engForeignData: a key holding another type or another limiter's layout fails with ErrForeignData and
// nothing is written. The scripts say so with their own error code (RLFOREIGN), never with a forged
// server reply such as WRONGTYPE.
func engForeignData(t *testing.T, e *env) {
	requireForeign := func(t *testing.T, err error, msgAndArgs ...any) {
		t.Helper()
		require.ErrorIs(t, err, ratelimit.ErrForeignData, msgAndArgs...)
		require.ErrorIs(t, err, luakit.ErrForeignData, msgAndArgs...)
		var re *rueidis.RedisError
		require.ErrorAs(t, err, &re, msgAndArgs...)
		require.True(t, strings.HasPrefix(re.Error(), "RLFOREIGN "), "the script's own code, not %q", re.Error())
		require.True(t, strings.HasPrefix(err.Error(), "ratelimit: "), "%q", err.Error())
	}
	comp := ratelimit.Composite{Components: []ratelimit.Component{ratelimit.FixedWindow{Limit: 5, Window: time.Hour}}}
	fixed := ratelimit.FixedWindow{Limit: 5, Window: time.Hour}
	sliding := ratelimit.SlidingWindow{Limit: 5, Window: time.Hour, Segments: 2}
	bucket := ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour}
	gcra := ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second}
	owners := map[string]ratelimit.Policy{"composite": comp, "fixed": fixed, "sliding": sliding, "bucket": bucket, "gcra": gcra}
	for ownerName, owner := range owners {
		for otherName, other := range owners {
			if ownerName == otherName {
				continue
			}
			t.Run(ownerName+"_then_"+otherName, func(t *testing.T) {
				key := e.key(t)
				res, err := e.limiter(t, nil, key, owner).AllowN(ctx(t), 1)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				before := e.dump(t, key)
				l := e.limiter(t, nil, key, other)
				for _, n := range []int64{1, 0} {
					_, err = l.AllowN(ctx(t), n)
					requireForeign(t, err, "n=%d", n)
					require.Equal(t, before, e.dump(t, key))
				}
			})
		}
	}
	t.Run("foreign_data", func(t *testing.T) {
		for name, p := range owners {
			key := e.key(t)
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Rpush().Key(key).Element("x").Build()).Error())
			_, err := e.limiter(t, nil, key, p).AllowN(ctx(t), 1)
			requireForeign(t, err, name)
			skey := e.key(t)
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(skey).Value("not a time").Build()).Error())
			_, err = e.limiter(t, nil, skey, p).AllowN(ctx(t), 1)
			requireForeign(t, err, name)
			v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(skey).Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, "not a time", v)
			hkey := e.key(t)
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Hset().Key(hkey).FieldValue().FieldValue("a", "b").Build()).Error())
			_, err = e.limiter(t, nil, hkey, p).AllowN(ctx(t), 1)
			requireForeign(t, err, name)
			require.Equal(t, map[string]string{"a": "b"}, e.dump(t, hkey))
		}
	})
}
