package ratelimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engineLegacyScenarios returns the scenarios of this file.
func engineLegacyScenarios() []scenario {
	return []scenario{
		{Name: "engine_legacy_ms_gcra", Run: engLegacyGCRA},
		{Name: "engine_legacy_ms_hash", Run: engLegacyHash},
		{Name: "engine_legacy_ms_composite", Run: engLegacyComposite},
	}
}

// engLegacyGCRA: a TAT stored in ms by an earlier build ("<TAT>", or a keyed "<TAT>|v|g<b>/<T ms>")
// is read as ms; a probe and Inspect write nothing; the first admission (and a keyed rejection)
// stores the µs form.
func engLegacyGCRA(t *testing.T, e *env) {
	p := ratelimit.GCRA{Burst: 10, EmissionInterval: time.Second}
	t.Run("limiter", func(t *testing.T) {
		key := e.key(t)
		now := e.serverMillis(t, key)
		tatMs := now + 4000 // 4 permits of debt
		engSeedRaw(t, e, key, map[string]string{"": engI(tatMs)}, tatMs)
		l := e.limiter(t, nil, key, p)
		writes := engWrites(e.CommandStats(t))
		res, err := l.AllowN(ctx(t), 0)
		require.NoError(t, err)
		require.Equal(t, int64(6), res.Remaining, "the ms TAT is read as ms")
		require.Equal(t, tatMs*1000-res.At.UnixMicro(), res.Reset.Microseconds())
		_, err = l.Inspect(ctx(t))
		require.NoError(t, err)
		require.Equal(t, writes, engWrites(e.CommandStats(t)), "a probe and Inspect write nothing")
		require.Equal(t, engI(tatMs), e.dump(t, key)[""])

		res, err = l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, int64(5), res.Remaining)
		require.Equal(t, "u"+engI(tatMs*1000+1000000), e.dump(t, key)[""], "stored in µs: old TAT × 1000 + T")
		require.Equal(t, tatMs+1000, engExpireTime(t, e, key))
	})
	t.Run("keyed", func(t *testing.T) {
		prefix := e.key(t) + ":"
		now := e.serverMillis(t, prefix+"k")
		tatMs := now + 10000 // the full burst used
		engSeedRaw(t, e, prefix+"k", map[string]string{"": engI(tatMs) + "|0|g10/1000"}, tatMs)
		k := limKeyed(t, e, p, ratelimit.WithKeyPrefix(prefix))
		res, err := k.AllowN(ctx(t), "k", 1)
		require.NoError(t, err)
		require.False(t, res.Allowed, "same settings in ms: no rescaling, still full")
		require.Equal(t, tatMs*1000+1000000-10000000-res.At.UnixMicro(), res.RetryAfter.Microseconds())
		require.Equal(t, "u"+engI(tatMs*1000)+"|0|g10/1000000", e.dump(t, prefix+"k")[""],
			"the keyed rejection stored the µs form, TAT unchanged")
	})
}

// engLegacyHash: fixed window, sliding window and token bucket hashes stored in ms (no "U" field)
// are read as ms and rewritten in µs by the first admission; a probe writes nothing.
func engLegacyHash(t *testing.T, e *env) {
	t.Run("fixed", func(t *testing.T) {
		key := e.key(t)
		now := e.serverMillis(t, key)
		end := now + 60000
		engSeedRaw(t, e, key, map[string]string{"L": "fw", "0.n": "2", "0.e": engI(end)}, end)
		l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
		writes := engWrites(e.CommandStats(t))
		res, err := l.AllowN(ctx(t), 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Remaining)
		require.Equal(t, end*1000-res.At.UnixMicro(), res.Reset.Microseconds())
		require.Equal(t, writes, engWrites(e.CommandStats(t)), "a probe writes nothing")
		res, err = l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, map[string]string{"L": "fw", "U": "1", "0.n": "3", "0.e": engI(end * 1000)}, e.dump(t, key))
		require.Equal(t, end, engExpireTime(t, e, key))
		// A refund of ms state compares the window's end in µs.
		require.NoError(t, l.Refund(ctx(t), 1))
		require.Equal(t, "2", e.dump(t, key)["0.n"])
	})
	t.Run("fixed_refund", func(t *testing.T) {
		key := e.key(t)
		now := e.serverMillis(t, key)
		end := now + 60000
		engSeedRaw(t, e, key, map[string]string{"L": "fw", "0.n": "2", "0.e": engI(end)}, end)
		l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
		require.NoError(t, l.Refund(ctx(t), 1))
		require.Equal(t, map[string]string{"L": "fw", "0.n": "1", "0.e": engI(end)}, e.dump(t, key),
			"the open ms window is refunded; its times are kept as they are")
	})
	t.Run("sliding", func(t *testing.T) {
		key := e.key(t)
		now := e.serverMillis(t, key)
		seg := now - now%1000 // a 1 s segment ending before now, active for the 10 s window
		engSeedRaw(t, e, key, map[string]string{"L": "sw", "0:" + engI(seg): "4"}, seg+10000)
		l := e.limiter(t, nil, key, ratelimit.SlidingWindow{Limit: 5, Window: 10 * time.Second, Segments: 10})
		res, err := l.AllowN(ctx(t), 2)
		require.NoError(t, err)
		require.False(t, res.Allowed)
		require.Equal(t, seg*1000+10000000-res.At.UnixMicro(), res.RetryAfter.Microseconds(), "the ms segment end, in µs")
		require.Equal(t, "4", e.dump(t, key)["0:"+engI(seg)], "a Limiter's rejection writes nothing")
		res, err = l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		got := e.dump(t, key)
		require.Equal(t, "1", got["U"])
		require.Equal(t, "4", got["0:"+engI(seg*1000)], "the segment renamed to its µs end")
		require.NotContains(t, got, "0:"+engI(seg))
	})
	t.Run("bucket", func(t *testing.T) {
		key := e.key(t)
		now := e.serverMillis(t, key)
		r := now - 500 // half a period elapsed
		engSeedRaw(t, e, key, map[string]string{"L": "tb", "0.t": "0", "0.r": engI(r)}, now+60000)
		l := e.limiter(t, nil, key, ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Second})
		res, err := l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		if res.At.UnixMicro() < r*1000+1000000 {
			require.False(t, res.Allowed)
			require.Equal(t, r*1000+1000000-res.At.UnixMicro(), res.RetryAfter.Microseconds(), "the partial period is kept")
		}
	})
}

// engLegacyComposite: a composite hash stored in ms with its "v1|..." signature is the same settings
// for a Limiter (no ErrConfigMismatch) and a Keyed, read as ms and rewritten with the "v2|..." µs
// signature; a refund accepts it.
func engLegacyComposite(t *testing.T, e *env) {
	p := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
		ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Minute},
	}}
	seed := func(t *testing.T, key string) int64 {
		now := e.serverMillis(t, key)
		engSeedRaw(t, e, key, map[string]string{"L": "cp", "S": "v1|f5/3600000|t4/1/60000",
			"0.n": "2", "0.e": engI(now + 1800000), "1.t": "2", "1.r": engI(now - 1000)}, now+1800000)
		return now
	}
	t.Run("limiter", func(t *testing.T) {
		key := e.key(t)
		now := seed(t, key)
		l := e.limiter(t, nil, key, p)
		require.NoError(t, l.Refund(ctx(t), 1), "the ms signature matches")
		res, err := l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		got := e.dump(t, key)
		require.Equal(t, engSignature(t, p), got["S"])
		require.True(t, strings.HasPrefix(got["S"], "v2|"))
		require.Equal(t, "1", got["U"])
		require.Equal(t, engI((now+1800000)*1000), got["0.e"])
		require.Equal(t, "2", got["0.n"], "2 - 1 refunded + 1")
		require.Equal(t, "2", got["1.t"], "2 + 1 refunded - 1")
		require.Equal(t, engI((now-1000)*1000), got["1.r"])
	})
	t.Run("keyed", func(t *testing.T) {
		prefix := e.key(t) + ":"
		seed(t, prefix+"c")
		k := limKeyed(t, e, p, ratelimit.WithKeyPrefix(prefix))
		res, err := k.AllowN(ctx(t), "c", 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.Equal(t, int64(1), res.Remaining, "the bucket: 2 - 1")
		got := e.dump(t, prefix+"c")
		require.Equal(t, engSignature(t, p), got["S"])
		require.Equal(t, "1", got["U"])
		require.Equal(t, "3", got["0.n"])
	})
}
