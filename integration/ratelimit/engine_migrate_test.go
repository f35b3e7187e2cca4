package ratelimit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engineMigrateScenarios returns the scenarios of this file.
func engineMigrateScenarios() []scenario {
	return []scenario{
		{Name: "engine_migrate_fixed", Run: engMigrateFixed},
		{Name: "engine_migrate_sliding", Run: engMigrateSliding},
		{Name: "engine_migrate_bucket", Run: engMigrateBucket},
		{Name: "engine_migrate_gcra", Run: engMigrateGCRA},
		{Name: "engine_migrate_composite", Run: engMigrateComposite},
		{Name: "engine_migrate_absent_stays_absent", Run: engMigrateAbsent},
	}
}

// engSeed writes a raw state at key in the µs form (fields of a hash, to which it adds "U"; or the
// TAT of a GCRA string under "", to which it adds the "u" marker) with an expiry at the given server
// time (µs, rounded up to ms), as a previous limiter would have left it.
func engSeed(t *testing.T, e *env, key string, state map[string]string, expireAt int64) {
	t.Helper()
	st := make(map[string]string, len(state)+1)
	for f, v := range state {
		st[f] = v
	}
	if v, ok := st[""]; ok {
		st[""] = "u" + v
	} else {
		st["U"] = "1"
	}
	engSeedRaw(t, e, key, st, engCeilDiv(expireAt, 1000))
}

// engSeedRaw writes state at key as it is, expiring at expireAtMs (Unix ms).
func engSeedRaw(t *testing.T, e *env, key string, state map[string]string, expireAtMs int64) {
	t.Helper()
	if v, ok := state[""]; ok {
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value(v).PxatMillisecondsTimestamp(expireAtMs).Build()).Error())
		return
	}
	cmd := e.Raw.B().Hset().Key(key).FieldValue()
	for f, v := range state {
		cmd = cmd.FieldValue(f, v)
	}
	require.NoError(t, e.Raw.Do(ctx(t), cmd.Build()).Error())
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Pexpireat().Key(key).MillisecondsTimestamp(expireAtMs).Build()).Error())
}

// engPXT is the PEXPIRETIME (ms) of an expiry at server time us (µs): rounded up.
func engPXT(us int64) int64 { return engCeilDiv(us, 1000) }

func engI(v int64) string { return strconv.FormatInt(v, 10) }

// engMigrated runs Update(Migrate) and returns the server-time interval [before, after] (µs) that
// contains the migration script's clock.
func engMigrated(t *testing.T, e *env, l *ratelimit.Limiter, key string, p ratelimit.Policy) (int64, int64) {
	t.Helper()
	before := e.serverMicros(t, key)
	scripts := engScripts(e.CommandStats(t))
	require.NoError(t, l.Update(ctx(t), p, ratelimit.Migrate))
	require.Equal(t, int64(1), engScripts(e.CommandStats(t))-scripts, "one migration script")
	return before, e.serverMicros(t, key)
}

// engMigrateFixed: the count and the deadline are kept; a new limit applies at once, the new width
// from the next window.
func engMigrateFixed(t *testing.T, e *env) {
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 3, Window: time.Hour})
	_, err := l.AllowN(ctx(t), 2)
	require.NoError(t, err)
	before, pxt := e.dump(t, key), engExpireTime(t, e, key)

	engMigrated(t, e, l, key, ratelimit.FixedWindow{Limit: 5, Window: 2 * time.Hour})
	require.Equal(t, before, e.dump(t, key), "count and deadline kept")
	require.Equal(t, pxt, engExpireTime(t, e, key))
	res, err := l.AllowN(ctx(t), 3)
	require.NoError(t, err)
	require.True(t, res.Allowed, "the larger limit applies at once")
	require.Zero(t, res.Remaining)
	require.Equal(t, engInt(before, "0.e")-res.At.UnixMicro(), res.Reset.Microseconds(), "same deadline")

	engMigrated(t, e, l, key, ratelimit.FixedWindow{Limit: 1, Window: 2 * time.Hour})
	res, err = l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "a decrease below the count denies until the deadline")
	require.Equal(t, engInt(before, "0.e")-res.At.UnixMicro(), res.RetryAfter.Microseconds())
	require.Equal(t, "5", e.dump(t, key)["0.n"])
	require.Equal(t, pxt, engExpireTime(t, e, key))

	// The new width applies to the next window.
	k2 := e.key(t)
	l2 := e.limiter(t, nil, k2, ratelimit.FixedWindow{Limit: 1, Window: 300 * time.Millisecond})
	_, err = l2.AllowN(ctx(t), 1)
	require.NoError(t, err)
	engMigrated(t, e, l2, k2, ratelimit.FixedWindow{Limit: 1, Window: time.Hour})
	end := engInt(e.dump(t, k2), "0.e")
	engWaitServer(t, e, k2, end)
	res, err = l2.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, res.At.UnixMicro()+3600*1000000, engInt(e.dump(t, k2), "0.e"), "next window uses the new width")
}

// engMigrateSliding: segments active under both windows are kept, the new window sets their
// lifetime, expired history is never recovered.
func engMigrateSliding(t *testing.T, e *env) {
	key := e.key(t)
	old := ratelimit.SlidingWindow{Limit: 10, Window: 10 * time.Second, Segments: 10}
	l := e.limiter(t, nil, key, old)
	now := e.serverMicros(t, key)
	// Ends: expired under the old window, active under old only, active under both.
	expired, oldOnly, both, recent := now-12000000, now-7000000, now-3000000, now+500000
	engSeed(t, e, key, map[string]string{
		"L": "sw", "0:" + engI(expired): "1", "0:" + engI(oldOnly): "2", "0:" + engI(both): "3", "0:" + engI(recent): "1",
	}, recent+10000000)

	// Growing the window to 20s does not recover the expired segment.
	engMigrated(t, e, l, key, ratelimit.SlidingWindow{Limit: 10, Window: 20 * time.Second, Segments: 10})
	got := e.dump(t, key)
	require.NotContains(t, got, "0:"+engI(expired), "expired history recovered")
	require.Equal(t, "2", got["0:"+engI(oldOnly)])
	require.Equal(t, engPXT(recent+20000000), engExpireTime(t, e, key), "the new window sets the lifetime")

	// Shrinking it to 5s keeps only segments active under both windows.
	engMigrated(t, e, l, key, ratelimit.SlidingWindow{Limit: 10, Window: 5 * time.Second, Segments: 5})
	got = e.dump(t, key)
	require.Equal(t, map[string]string{"L": "sw", "U": "1", "0:" + engI(both): "3", "0:" + engI(recent): "1"}, got)
	require.Equal(t, engPXT(recent+5000000), engExpireTime(t, e, key))
	res, err := l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Equal(t, int64(6), res.Remaining)
	require.Equal(t, recent+5000000-res.At.UnixMicro(), res.Reset.Microseconds())
	// New permits use the new segmentation (1s segments).
	res, err = l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	seg := engCeilDiv(res.At.UnixMicro(), 1000000) * 1000000
	require.Contains(t, e.dump(t, key), "0:"+engI(seg))
}

// engMigrateBucket: complete periods are settled at the old rate, tokens clamped to the new limit,
// the new period starts at the migration and the old partial period is discarded.
func engMigrateBucket(t *testing.T, e *env) {
	old := ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Second}
	t.Run("settle_and_restart", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, old)
		now := e.serverMicros(t, key)
		// One token at a period that started 2.5 s ago: two complete periods (+2), half a period.
		engSeed(t, e, key, map[string]string{"L": "tb", "0.t": "1", "0.r": engI(now - 2500000)}, now+60000000)
		from, to := engMigrated(t, e, l, key, ratelimit.TokenBucket{Limit: 20, TokensPerPeriod: 2, Period: 300 * time.Millisecond})
		got := e.dump(t, key)
		require.Equal(t, "3", got["0.t"], "settled at the old rate; a larger limit adds no tokens")
		r := engInt(got, "0.r")
		require.GreaterOrEqual(t, r, from)
		require.LessOrEqual(t, r, to, "the new period starts at the migration")
		require.Equal(t, engPXT(r+9*300000), engExpireTime(t, e, key), "full after ceil(17/2) new periods")
		res, err := l.AllowN(ctx(t), 0)
		require.NoError(t, err)
		require.Equal(t, max(int64(3), 3+2*((res.At.UnixMicro()-r)/300000)), res.Remaining)
	})
	t.Run("clamp", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, old)
		now := e.serverMicros(t, key)
		engSeed(t, e, key, map[string]string{"L": "tb", "0.t": "6", "0.r": engI(now - 100000)}, now+60000000)
		engMigrated(t, e, l, key, ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Second})
		// Six tokens clamp to the new limit of four: the bucket is full, which is the absent state.
		require.False(t, e.exists(t, key), "a full bucket after clamping stays stored")
		res, err := l.AllowN(ctx(t), 0)
		require.NoError(t, err)
		require.Equal(t, int64(4), res.Remaining)
	})
	t.Run("clamp_below", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, old)
		now := e.serverMicros(t, key)
		engSeed(t, e, key, map[string]string{"L": "tb", "0.t": "2", "0.r": engI(now - 100000)}, now+60000000)
		from, to := engMigrated(t, e, l, key, ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour})
		got := e.dump(t, key)
		require.Equal(t, "2", got["0.t"])
		require.GreaterOrEqual(t, engInt(got, "0.r"), from)
		require.LessOrEqual(t, engInt(got, "0.r"), to, "the partial period of 100 ms is discarded")
	})
}

// engMigrateGCRA: the debt, including a partial permit, is rescaled by new/old emission interval and
// rounded up to whole µs; a debt above MaxSpan is rejected with nothing written.
func engMigrateGCRA(t *testing.T, e *env) {
	t.Run("rescale_round_up", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 10, EmissionInterval: time.Second})
		now := e.serverMicros(t, key)
		tat := now + 2500000 // two and a half permits of debt
		engSeed(t, e, key, map[string]string{"": engI(tat)}, tat)
		from, to := engMigrated(t, e, l, key, ratelimit.GCRA{Burst: 10, EmissionInterval: 333333 * time.Microsecond})
		got := engTAT(e.dump(t, key))
		match := false
		for m := from; m <= to; m++ { // the migration's server time m is within [from, to]
			debt := tat - m
			if got == m+(debt*333333+999999)/1000000 {
				match = true
			}
		}
		require.True(t, match, "TAT %d is not now + ceil(debt*333333/1000000) for any migration time in [%d, %d] (TAT was %d)", got, from, to, tat)
		require.Equal(t, engPXT(got), engExpireTime(t, e, key))
	})
	t.Run("exact_multiple", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 10, EmissionInterval: 3 * time.Millisecond})
		now := e.serverMicros(t, key)
		tat := now + 30000000
		engSeed(t, e, key, map[string]string{"": engI(tat)}, tat)
		from, to := engMigrated(t, e, l, key, ratelimit.GCRA{Burst: 10, EmissionInterval: 7 * time.Millisecond})
		got := engTAT(e.dump(t, key))
		match := false
		for m := from; m <= to; m++ {
			if got == m+((tat-m)*7+2)/3 {
				match = true
			}
		}
		require.True(t, match, "TAT %d for [%d, %d]", got, from, to)
	})
	t.Run("debt_above_capacity_drains", func(t *testing.T) {
		key := e.key(t)
		l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 10, EmissionInterval: 100 * time.Millisecond})
		_, err := l.AllowN(ctx(t), 10)
		require.NoError(t, err)
		engMigrated(t, e, l, key, ratelimit.GCRA{Burst: 2, EmissionInterval: 100 * time.Millisecond})
		res, err := l.AllowN(ctx(t), 1)
		require.NoError(t, err)
		require.False(t, res.Allowed, "debt above the new burst waits to drain")
		tat := engTAT(e.dump(t, key))
		require.Equal(t, tat+100000-200000-res.At.UnixMicro(), res.RetryAfter.Microseconds())
	})
	t.Run("overflow", func(t *testing.T) {
		key := e.key(t)
		p := ratelimit.GCRA{Burst: 1000, EmissionInterval: time.Millisecond}
		l := e.limiter(t, nil, key, p)
		_, err := l.AllowN(ctx(t), 500)
		require.NoError(t, err)
		before, pxt := e.dump(t, key), engExpireTime(t, e, key)
		huge := ratelimit.GCRA{Burst: 1, EmissionInterval: ratelimit.MaxSpan}
		err = l.Update(ctx(t), huge, ratelimit.Migrate)
		require.ErrorIs(t, err, ratelimit.ErrDebtOverflow)
		require.Equal(t, before, e.dump(t, key), "nothing written")
		require.Equal(t, pxt, engExpireTime(t, e, key))
		require.Equal(t, p, l.Policy(), "the old settings are kept")
	})
}

// engMigrateComposite: each component by its rule in one script, and the signature is rewritten; a
// mismatched stored signature fails before writing.
func engMigrateComposite(t *testing.T, e *env) {
	key := e.key(t)
	from := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
		ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Hour},
		ratelimit.SlidingWindow{Limit: 10, Window: time.Hour, Segments: 4},
	}}
	to := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 8, Window: 2 * time.Hour},
		ratelimit.TokenBucket{Limit: 6, TokensPerPeriod: 2, Period: 30 * time.Minute},
		ratelimit.SlidingWindow{Limit: 20, Window: 30 * time.Minute, Segments: 2},
	}}
	l := e.limiter(t, nil, key, from)
	_, err := l.AllowN(ctx(t), 3)
	require.NoError(t, err)
	before := e.dump(t, key)

	// A stored signature of other settings: ErrConfigMismatch, nothing written, old settings kept.
	mkey := e.key(t)
	lm := e.limiter(t, nil, mkey, from)
	_, err = lm.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Hset().Key(mkey).FieldValue().FieldValue("S", "v2|other").Build()).Error())
	mstate := e.dump(t, mkey)
	require.ErrorIs(t, lm.Update(ctx(t), to, ratelimit.Migrate), ratelimit.ErrConfigMismatch)
	require.Equal(t, mstate, e.dump(t, mkey))
	require.Equal(t, from, lm.Policy())

	start, end := engMigrated(t, e, l, key, to)
	got := e.dump(t, key)
	require.Equal(t, engSignature(t, to), got["S"], "signature rewritten")
	require.Equal(t, before["0.n"], got["0.n"], "fixed: count kept")
	require.Equal(t, before["0.e"], got["0.e"], "fixed: deadline kept")
	require.Equal(t, "6", got["1.t"], "bucket: 7 tokens clamped to 6")
	require.GreaterOrEqual(t, engInt(got, "1.r"), start)
	require.LessOrEqual(t, engInt(got, "1.r"), end)
	for f, v := range before {
		if len(f) > 2 && f[:2] == "2:" {
			require.Equal(t, v, got[f], "sliding: active segment kept")
		}
	}
	// Every component back at full capacity: the fixed window's end is the latest.
	require.Equal(t, engPXT(engInt(got, "0.e")), engExpireTime(t, e, key))
	res, err := l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Remaining, "fixed 8-3 is now the lowest")
	require.Equal(t, 0, res.Component)
}

// engMigrateAbsent: migrating an absent key leaves it absent for every algorithm.
func engMigrateAbsent(t *testing.T, e *env) {
	pairs := []struct{ from, to ratelimit.Policy }{
		{ratelimit.FixedWindow{Limit: 1, Window: time.Second}, ratelimit.FixedWindow{Limit: 2, Window: time.Second}},
		{ratelimit.SlidingWindow{Limit: 1, Window: time.Second}, ratelimit.SlidingWindow{Limit: 2, Window: time.Second}},
		{ratelimit.TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: time.Second}, ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Second}},
		{ratelimit.GCRA{Burst: 1, EmissionInterval: time.Second}, ratelimit.GCRA{Burst: 2, EmissionInterval: time.Millisecond}},
		{ratelimit.Composite{Components: []ratelimit.Component{ratelimit.FixedWindow{Limit: 1, Window: time.Second}}},
			ratelimit.Composite{Components: []ratelimit.Component{ratelimit.FixedWindow{Limit: 3, Window: time.Second}}}},
	}
	for _, p := range pairs {
		key := e.key(t)
		l := e.limiter(t, nil, key, p.from)
		writes := engWrites(e.CommandStats(t))
		require.NoError(t, l.Update(ctx(t), p.to, ratelimit.Migrate))
		require.Equal(t, writes, engWrites(e.CommandStats(t)), "%T: migration of an absent key wrote", p.from)
		require.False(t, e.exists(t, key))
		res, err := l.AllowN(ctx(t), 0)
		require.NoError(t, err)
		require.Equal(t, engCapacity(p.to), res.Remaining, "%T: full capacity under the new settings", p.from)
	}
}
