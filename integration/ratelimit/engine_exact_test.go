package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engExactCases are the exactness tables: per algorithm, arrivals relative to an anchor (see engStep)
// with the permits requested. What each step must return is computed by the models from the
// decision's server time; the notes say what the row exercises when it arrives on time.
var engExactCases = []engCase{
	{name: "fixed", policy: ratelimit.FixedWindow{Limit: 3, Window: 300 * time.Millisecond}, steps: []engStep{
		{0, 1, "first acquisition starts the window"},
		{0, 2, "n equal to the remaining permits"},
		{0, 1, "full: rejected, RetryAfter until the window ends"},
		{0, 0, "probe of a full window writes nothing"},
		{0, 3, "n equal to the capacity: rejected with RetryAfter"},
		{0, 4, "n above the capacity: local, no RetryAfter"},
		{299, 0, "last ms of the window: probe rejected"},
		{299, 1, "last ms of the window: rejected, RetryAfter 1ms"},
		{300, 0, "window end: probe allowed"},
		{300, 3, "new window starts at this acquisition; n = capacity admitted"},
		{301, 1, "second window full"},
		{599, 1, "second window still full"},
		{700, 2, "third window"},
	}},
	{name: "fixed_limit1", policy: ratelimit.FixedWindow{Limit: 1, Window: 200 * time.Millisecond}, steps: []engStep{
		{0, 1, "the only permit"},
		{0, 1, "rejected, RetryAfter = window"},
		{199, 0, "last ms: probe rejected"},
		{200, 1, "next window"},
		{200, 2, "above the capacity"},
	}},
	{name: "sliding", policy: ratelimit.SlidingWindow{Limit: 4, Window: 400 * time.Millisecond, Segments: 4}, steps: []engStep{
		{0, 2, "charged to the segment ending at the anchor"},
		{50, 1, "charged to the next segment"},
		{150, 1, "charged to the third segment; full"},
		{160, 1, "rejected: RetryAfter until the first segment expires"},
		{160, 3, "rejected: RetryAfter until two segments expire"},
		{160, 4, "n = capacity: RetryAfter until three segments expire"},
		{160, 0, "probe writes nothing"},
		{160, 5, "above the capacity"},
		{399, 0, "last ms before the first segment expires"},
		{400, 2, "segment edge: the first segment's permits are back; charged to a segment ending now"},
		{400, 1, "full again"},
		{499, 0, "last ms before the second segment expires"},
		{500, 1, "second segment expired"},
		{1300, 4, "all expired: capacity admitted"},
	}},
	{name: "sliding_limit1", policy: ratelimit.SlidingWindow{Limit: 1, Window: 200 * time.Millisecond, Segments: 2}, steps: []engStep{
		{0, 1, "the only permit"},
		{0, 1, "rejected"},
		{199, 0, "last ms"},
		{200, 1, "expired at segment end + window"},
	}},
	{name: "sliding_1ms_segments", policy: ratelimit.SlidingWindow{Limit: 2, Window: 50 * time.Millisecond, Segments: 50}, steps: []engStep{
		{0, 1, "1ms segments: a sliding log"},
		{10, 1, "full"},
		{20, 1, "rejected until the first permit is exactly one window old"},
		{49, 0, "one ms before"},
		{50, 1, "exactly one window later"},
	}},
	{name: "bucket", policy: ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 200 * time.Millisecond}, steps: []engStep{
		{0, 3, "starts full; empties; the refill clock starts"},
		{0, 1, "rejected: RetryAfter one period"},
		{0, 2, "rejected: RetryAfter two periods"},
		{0, 3, "n = capacity: RetryAfter three periods"},
		{0, 0, "probe writes nothing"},
		{0, 4, "above the capacity"},
		{199, 0, "last ms before the refill"},
		{200, 1, "refill edge"},
		{300, 1, "rejected: the partial period is retained"},
		{400, 1, "second refill"},
		{1200, 0, "full again: probe"},
		{1200, 3, "from full: the refill clock restarts"},
	}},
	{name: "bucket_multi", policy: ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 2, Period: 150 * time.Millisecond}, steps: []engStep{
		{0, 5, "empty"},
		{150, 2, "two tokens per period"},
		{150, 1, "rejected"},
		{400, 0, "one complete period more, partial retained"},
		{400, 3, "rejected: needs two periods"},
		{1000, 0, "clamped at the limit"},
	}},
	{name: "bucket_limit1", policy: ratelimit.TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: 200 * time.Millisecond}, steps: []engStep{
		{0, 1, "the only token"},
		{0, 1, "rejected"},
		{199, 0, "last ms"},
		{200, 1, "refilled"},
	}},
	{name: "gcra", policy: ratelimit.GCRA{Burst: 3, EmissionInterval: 100 * time.Millisecond}, steps: []engStep{
		{0, 1, "burst"},
		{0, 2, "burst used up"},
		{0, 1, "rejected: RetryAfter one interval"},
		{0, 3, "n = burst: RetryAfter three intervals"},
		{0, 0, "probe: TAT unchanged"},
		{0, 4, "above the burst"},
		{99, 0, "one ms before the next permit"},
		{100, 1, "one emission interval later"},
		{150, 1, "rejected: RetryAfter the rest of the interval"},
		{300, 2, "two intervals"},
		{700, 0, "debt drained: full burst, the key expired"},
		{700, 3, "full burst again"},
	}},
	{name: "gcra_limit1", policy: ratelimit.GCRA{Burst: 1, EmissionInterval: 200 * time.Millisecond}, steps: []engStep{
		{0, 1, "the only permit"},
		{0, 1, "rejected: RetryAfter one interval"},
		{199, 0, "last ms"},
		{200, 1, "one interval later"},
		{200, 2, "above the burst"},
	}},
	// Sub-millisecond and non-integer-millisecond settings: exact in µs (steps in µs). Late
	// arrivals are common at this scale; the models compute every expectation from the decision's
	// server time, so a late row checks another instant exactly.
	{name: "gcra_1.5ms", unit: time.Microsecond, policy: ratelimit.GCRA{Burst: 4, EmissionInterval: 1500 * time.Microsecond}, steps: []engStep{
		{0, 4, "burst used: debt 6ms"},
		{0, 1, "rejected: RetryAfter exactly 1.5ms"},
		{0, 0, "probe: TAT unchanged"},
		{1500, 1, "one 1.5ms interval later"},
		{2250, 1, "rejected: RetryAfter the remaining 0.75ms"},
		{4500, 2, "two intervals"},
		{20000, 0, "drained"},
		{20000, 4, "full burst again"},
	}},
	{name: "gcra_2500_per_s", unit: time.Microsecond, policy: ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second / 2500}, steps: []engStep{
		{0, 5, "burst"},
		{0, 1, "rejected: RetryAfter 400µs"},
		{400, 1, "one 400µs interval later"},
		{1200, 2, "two more"},
		{10000, 5, "drained"},
	}},
	{name: "gcra_0.3ms", unit: time.Microsecond, policy: ratelimit.GCRA{Burst: 3, EmissionInterval: 300 * time.Microsecond}, steps: []engStep{
		{0, 3, "burst"},
		{0, 3, "n = burst: RetryAfter 0.9ms"},
		{300, 1, "one 0.3ms interval later"},
		{5000, 3, "drained"},
	}},
	{name: "fixed_1.5ms", unit: time.Microsecond, policy: ratelimit.FixedWindow{Limit: 2, Window: 1500 * time.Microsecond}, steps: []engStep{
		{0, 2, "window starts: ends 1.5ms later"},
		{0, 1, "full: RetryAfter until the window ends"},
		{1500, 2, "the window ended at 1.5ms"},
		{20000, 1, "a later window"},
	}},
	{name: "sliding_0.3ms_segments", unit: time.Microsecond, policy: ratelimit.SlidingWindow{Limit: 2, Window: 3 * time.Millisecond, Segments: 10}, steps: []engStep{
		{0, 1, "charged to the 300µs segment ending at the anchor"},
		{300, 1, "the next segment; full"},
		{600, 1, "rejected until the first segment is one window old"},
		{3000, 1, "the first segment expired"},
		{20000, 2, "all expired"},
	}},
	{name: "bucket_0.4ms", unit: time.Microsecond, policy: ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 400 * time.Microsecond}, steps: []engStep{
		{0, 3, "empties; the refill clock starts"},
		{0, 1, "rejected: RetryAfter one 0.4ms period"},
		{400, 1, "refill edge"},
		{600, 1, "rejected: the partial period is retained"},
		{800, 1, "second refill"},
		{20000, 3, "full again"},
	}},
	{name: "composite_non_integer_ms", unit: time.Microsecond, policy: ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 3, Window: 2500 * time.Microsecond},
		ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 700 * time.Microsecond},
	}}, steps: []engStep{
		{0, 2, "the bucket empties, the window counts 2"},
		{0, 1, "rejected by the bucket: RetryAfter 0.7ms"},
		{700, 1, "one token back; the window is full"},
		{1400, 1, "rejected by the window until 2.5ms"},
		{2500, 1, "new window"},
		{30000, 2, "everything full again"},
	}},
	engCompositeCase,
}

// engineExactScenarios returns the scenarios of this file.
func engineExactScenarios() []scenario {
	return []scenario{
		{Name: "engine_exact_tables", Run: engExactTables},
		{Name: "engine_probe_writes_nothing", Run: engProbeWritesNothing},
	}
}

// engExactTables runs every exactness table and reports the number of rows and how many arrived on
// their target millisecond (informational: correctness never depends on it).
func engExactTables(t *testing.T, e *env) {
	total := engStats{}
	for _, c := range engExactCases {
		t.Run(c.name, func(t *testing.T) {
			st := engRun(t, e, c)
			require.Equal(t, len(c.steps), st.rows)
			total.rows += st.rows
			total.onTarget += st.onTarget
			total.local += st.local
			total.timed += st.timed
		})
	}
	t.Logf("exactness tables: %d cases, %d rows (%d decided locally); %d of %d rows sent at a future time arrived on their target time",
		len(engExactCases), total.rows, total.local, total.onTarget, total.timed)
}

// engProbeWritesNothing: an n = 0 probe and a rejection leave the stored state byte for byte
// unchanged (windows long enough that nothing expires during the check).
func engProbeWritesNothing(t *testing.T, e *env) {
	policies := map[string]ratelimit.Policy{
		"fixed":   ratelimit.FixedWindow{Limit: 2, Window: time.Hour},
		"sliding": ratelimit.SlidingWindow{Limit: 2, Window: time.Hour, Segments: 60},
		"bucket":  ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Hour},
		"gcra":    ratelimit.GCRA{Burst: 2, EmissionInterval: time.Hour},
		"composite": ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Hour},
			ratelimit.SlidingWindow{Limit: 2, Window: time.Hour, Segments: 10},
			ratelimit.FixedWindow{Limit: 9, Window: time.Hour},
		}},
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			key := e.key(t)
			l := e.limiter(t, nil, key, p)
			// A probe of an absent key creates nothing.
			res, err := l.AllowN(ctx(t), 0)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.Equal(t, int64(2), res.Remaining)
			require.False(t, e.exists(t, key), "a probe created the key")

			res, err = l.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			state, pxt := e.dump(t, key), engExpireTime(t, e, key)
			require.NotNil(t, state)

			res, err = l.AllowN(ctx(t), 0)
			require.NoError(t, err)
			require.True(t, res.Allowed, "one permit is left")
			require.Equal(t, int64(1), res.Remaining)
			require.Equal(t, state, e.dump(t, key), "a probe changed the state")

			res, err = l.AllowN(ctx(t), 2)
			require.NoError(t, err)
			require.False(t, res.Allowed)
			require.Positive(t, res.RetryAfter)
			require.Equal(t, state, e.dump(t, key), "a rejection changed the state")
			require.Equal(t, pxt, engExpireTime(t, e, key), "a rejection changed the expiry")

			res, err = l.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.Zero(t, res.Remaining)
			full := e.dump(t, key)

			res, err = l.AllowN(ctx(t), 0)
			require.NoError(t, err)
			require.False(t, res.Allowed, "probe of an exhausted limit")
			require.Positive(t, res.RetryAfter)
			require.Equal(t, full, e.dump(t, key), "a rejected probe changed the state")
		})
	}
}
