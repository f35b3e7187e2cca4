package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engineForeignFormatScenarios returns the scenarios of this file.
func engineForeignFormatScenarios() []scenario {
	return []scenario{{Name: "engine_foreign_format", Run: engForeignFormat}}
}

// engForeignFormat: state in the millisecond form of early development builds (a GCRA value without
// the "u" marker, a hash without the "U" field, a "v1|..." signature), written with a raw SET or
// HSET, is foreign data for every call that reads it (a decision, a probe, Inspect, Refund, Reset,
// Update(Migrate), Keyed calls), and nothing is written: it is never read as µs or upgraded.
func engForeignFormat(t *testing.T, e *env) {
	gcra := ratelimit.GCRA{Burst: 10, EmissionInterval: time.Second}
	composite := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
		ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Minute},
	}}
	cases := []struct {
		name   string
		policy ratelimit.Policy
		to     ratelimit.Policy // a compatible policy for Update(Migrate)
		state  func(nowMs int64) map[string]string
	}{
		{"gcra", gcra, ratelimit.GCRA{Burst: 10, EmissionInterval: 2 * time.Second},
			func(now int64) map[string]string { return map[string]string{"": engI(now + 4000)} }},
		{"gcra_keyed_form", gcra, ratelimit.GCRA{Burst: 10, EmissionInterval: 2 * time.Second},
			func(now int64) map[string]string { return map[string]string{"": engI(now+4000) + "|0|g10/1000"} }},
		{"fixed", ratelimit.FixedWindow{Limit: 3, Window: time.Minute}, ratelimit.FixedWindow{Limit: 6, Window: time.Minute},
			func(now int64) map[string]string {
				return map[string]string{"L": "fw", "0.n": "2", "0.e": engI(now + 60000)}
			}},
		{"sliding", ratelimit.SlidingWindow{Limit: 5, Window: 10 * time.Second, Segments: 10},
			ratelimit.SlidingWindow{Limit: 6, Window: 10 * time.Second, Segments: 10},
			func(now int64) map[string]string {
				return map[string]string{"L": "sw", "0:" + engI(now-now%1000): "4"}
			}},
		{"bucket", ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Second},
			ratelimit.TokenBucket{Limit: 6, TokensPerPeriod: 1, Period: time.Second},
			func(now int64) map[string]string {
				return map[string]string{"L": "tb", "0.t": "0", "0.r": engI(now - 500)}
			}},
		{"composite", composite, ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 6, Window: time.Hour},
			ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Minute},
		}}, func(now int64) map[string]string {
			return map[string]string{"L": "cp", "S": "v1|f5/3600000|t4/1/60000",
				"0.n": "2", "0.e": engI(now + 1800000), "1.t": "2", "1.r": engI(now - 1000)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := e.key(t) + ":"
			key := prefix + "k"
			now := e.serverMillis(t, key)
			state := tc.state(now)
			engSeedRaw(t, e, key, state, now+3600000)
			l := e.limiter(t, nil, key, tc.policy)
			k := limKeyed(t, e, tc.policy, ratelimit.WithKeyPrefix(prefix))
			calls := []struct {
				name string
				call func() error
			}{
				{"Limiter.AllowN(1)", func() error { _, err := l.AllowN(ctx(t), 1); return err }},
				{"Limiter.AllowN(0)", func() error { _, err := l.AllowN(ctx(t), 0); return err }},
				{"Limiter.Inspect", func() error { _, err := l.Inspect(ctx(t)); return err }},
				{"Keyed.AllowN(1)", func() error { _, err := k.AllowN(ctx(t), "k", 1); return err }},
				{"Keyed.AllowN(0)", func() error { _, err := k.AllowN(ctx(t), "k", 0); return err }},
				{"Keyed.Inspect", func() error { _, err := k.Inspect(ctx(t), "k"); return err }},
				{"Limiter.Reset", func() error { return l.Reset(ctx(t)) }},
				{"Keyed.Reset", func() error { return k.Reset(ctx(t), "k") }},
				{"Limiter.Update(Migrate)", func() error { return l.Update(ctx(t), tc.to, ratelimit.Migrate) }},
			}
			if tc.name != "sliding" { // a sliding window has no refund
				calls = append(calls,
					struct {
						name string
						call func() error
					}{"Limiter.Refund", func() error { return l.Refund(ctx(t), 1) }},
					struct {
						name string
						call func() error
					}{"Keyed.Refund", func() error { return k.Refund(ctx(t), "k", 1) }})
			}
			for _, c := range calls {
				require.ErrorIs(t, c.call(), ratelimit.ErrForeignData, c.name)
				require.Equal(t, state, e.dump(t, key), "%s wrote the foreign value", c.name)
			}
		})
	}
}
