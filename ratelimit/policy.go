package ratelimit

import "time"

// Policy is the settings of one limiter: a [FixedWindow], [SlidingWindow], [TokenBucket], [GCRA] or
// [Composite] value. Policies are plain immutable values; [New] validates them and rounds every
// duration up to whole microseconds (the scripts compute in µs from the server's TIME, so intervals
// such as 1.5ms or 0.3ms are exact; Policy reports the rounded values). Every duration must be
// from 1µs to [MaxSpan], and so must every derived span named below. The set of implementations is
// closed.
type Policy interface {
	policy()
}

// Component is a policy that can be one part of a [Composite]: [FixedWindow], [SlidingWindow] or
// [TokenBucket]. GCRA is standalone only.
type Component interface {
	Policy
	component()
}

// FixedWindow admits at most Limit permits per window. A window starts at the first successful
// acquisition after the previous one ended (not at a wall-clock boundary) and lasts Window: a window
// started at server time s admits until s+Window-1µs and ends at s+Window, when the full Limit is
// available again. RetryAfter of a rejection is the time until the window ends.
//
// State: one hash at the key holding the count and the window's end; it expires when the window
// ends.
//
// Update (Migrate): the count and the window's end are kept. A new Limit applies at once (a decrease
// below the count denies requests until the end); a new Window applies from the next window.
//
// Limit must be in [1, MaxLimit]. Window must be from 1µs to MaxSpan and is rounded up to whole
// microseconds.
type FixedWindow struct {
	// Limit is the number of permits per window, in [1, MaxLimit]. The zero value is invalid.
	Limit int64
	// Window is the window's length: 1µs to MaxSpan, rounded up to whole microseconds.
	Window time.Duration
}

// SlidingWindow admits at most Limit permits in any rolling Window, tracked in Segments segments.
// Segments are aligned on server time: the segment width is w = ceil(Window/Segments) whole
// microseconds and a permit acquired at server time t (µs) is charged to the segment ending at
// ceil(t/w)·w (timestamps round up). It counts against the limit until that segment end plus
// Window: never early, at most one segment (w−1µs) late. More segments shrink that delay and cost
// one hash field each. RetryAfter of a rejection is the time until enough of the oldest segments
// expire for the whole request.
//
// State: one hash at the key with one count per active segment; it expires when the last segment
// does (its end plus Window).
//
// Update (Migrate): segments active under both the old and the new window are kept, others are
// deleted (expired history is never recovered); the new Window sets the remaining lifetime of the
// kept ones, and new permits use the new segmentation. A larger old segment can keep delaying
// expiry after the segment width shrinks.
//
// Lateness: a permit is released at most one segment (Window/Segments, rounded up to whole µs,
// minus 1µs) after its rolling window ends, so a rejection's RetryAfter is at most Window plus one
// segment. The default of [DefaultSegments] (10) keeps that lateness within a tenth of the window (a
// 10s window: at most 1s late) for one hash field per active segment; Segments 1 makes a rejection
// last up to nearly twice the window.
//
// Limit must be in [1, MaxLimit]; Segments in [1, 1024] (0 means DefaultSegments, 10); Window from
// 1µs to MaxSpan, rounded up to whole microseconds.
type SlidingWindow struct {
	// Limit is the number of permits in any rolling window, in [1, MaxLimit].
	Limit int64
	// Window is the rolling window's length: 1µs to MaxSpan, rounded up to whole microseconds.
	Window time.Duration
	// Segments is how many segments the window is tracked in, in [1, MaxSegments]; 0 means
	// [DefaultSegments] (10: a permit is released at most a tenth of the window late), and the
	// limiters' Policy methods then report 10.
	Segments int
}

// TokenBucket holds at most Limit tokens and adds TokensPerPeriod tokens at the end of every complete
// Period (never above Limit). A new bucket starts full. The refill clock starts at the first
// acquisition from a full bucket; elapsed partial periods are kept: a request between refills does
// not reset the refill clock. RetryAfter of a rejection is the time until enough periods complete
// to hold the whole request.
//
// State: one hash at the key with the token count and the start of the current refill period; it
// expires when the bucket is full again.
//
// Update (Migrate): complete periods are settled at the old rate, the tokens are clamped to the new
// Limit, and the new period starts at the migration (the old partial period is discarded). A larger
// Limit adds room to refill, not tokens.
//
// Limit and TokensPerPeriod must be in [1, MaxLimit]; Period from 1µs, rounded up to whole
// microseconds; the full refill duration (ceil(Limit/TokensPerPeriod) periods) must be at most
// MaxSpan. A Period below 1ms refills more than 1000 times a second exactly.
type TokenBucket struct {
	// Limit is the bucket's capacity in tokens (permits), in [1, MaxLimit]; a new bucket holds Limit.
	Limit int64
	// TokensPerPeriod is how many tokens each complete Period adds, in [1, MaxLimit].
	TokensPerPeriod int64
	// Period is the refill period: at least 1µs, rounded up to whole microseconds.
	Period time.Duration
}

// GCRA is the Generic Cell Rate Algorithm: up to Burst permits at once, then one permit per
// EmissionInterval. Burst is the total capacity, not an allowance above the steady rate. The state is
// one theoretical arrival time (TAT) and expires once the full burst is available again.
//
// Exactly, with T the emission interval in µs and now the server time in µs: n permits are admitted iff
// max(TAT, now) + n·T − now ≤ Burst·T, and then TAT becomes max(TAT, now) + n·T. Rejections and
// n = 0 probes (which test one permit) leave the TAT unchanged. RetryAfter of a rejection is
// max(TAT, now) + n·T − Burst·T − now, the time until the whole request fits.
//
// Update (Migrate): the outstanding debt TAT − now, including a partial permit, is rescaled to
// debt × new T / old T, rounded up to whole microseconds. A smaller Burst can leave debt above the
// capacity: requests wait until it drains. A rescaled debt above MaxSpan is rejected with
// [ErrDebtOverflow] before anything is written.
//
// Burst must be in [1, MaxLimit]; EmissionInterval from 1µs, rounded up to whole microseconds (an
// interval below 1ms admits more than 1000 permits a second on one key, exactly);
// Burst × EmissionInterval must be at most MaxSpan.
//
// Source: the ATM Forum Traffic Management Specification 4.0 (virtual scheduling form), as in
// Brandur Leach's "Rate limiting, cells, and GCRA" and go-redis/redis_rate.
type GCRA struct {
	// Burst is the total capacity: how many permits can be taken at once, in [1, MaxLimit].
	Burst int64
	// EmissionInterval is the time one permit takes to come back (1/rate): at least 1µs, rounded up
	// to whole microseconds.
	EmissionInterval time.Duration
}

// Composite applies 1 to 32 component limits to one key atomically: a request is admitted only if
// every component admits it, and then consumes from every component; a rejection or an n = 0 probe
// writes nothing. RetryAfter is the maximum over the components for the whole request.
// Result.Component names the controlling component, whose Remaining, Limit and Reset are reported:
// for an admission the one with the lowest Remaining, for a rejection the rejecting component with
// the longest wait (the first on ties in both cases).
//
// State: one hash at the key with every component's fields and a configuration signature: the
// ordered list of every component's rounded settings. A stored signature that differs from the
// limiter's fails the decision with [ErrConfigMismatch] without consuming; every process sharing the
// key must use the same ordered list. The hash expires when every component is back at full
// capacity. Standalone limiters use other layouts and cannot share the key ([ErrForeignData]).
//
// Update (Migrate): each component follows its own rule (see [FixedWindow], [SlidingWindow],
// [TokenBucket]) in the same script, and the new signature is stored; the number and kinds of the
// components cannot change.
//
// Components must hold 1 to MaxComponents non-nil values, each valid on its own.
type Composite struct {
	// Components are the limits applied together, 1 to MaxComponents of them, in a fixed order (the
	// order is part of the stored signature). The slice is copied by New and Update.
	Components []Component
}

// MaxLimit is the largest permit count a policy accepts (2^50): permit arithmetic runs in Lua's
// double-precision numbers, which are exact up to 2^53.
const MaxLimit = int64(1) << 50

// MaxSpan is the longest duration a policy may use (2^51 µs, about 71 years), and the bound of
// every span derived from one: a GCRA's Burst × EmissionInterval, a token bucket's full refill, a
// migrated GCRA debt. The scripts compute in µs in Lua's doubles, exact up to 2^53: the server time
// in µs plus twice MaxSpan stays below that.
const MaxSpan = time.Duration(maxSpan) * time.Microsecond

// MaxComponents is the largest number of components in a [Composite].
const MaxComponents = 32

// MaxSegments is the largest number of segments of a [SlidingWindow].
const MaxSegments = 1024

// DefaultSegments is the number of segments of a [SlidingWindow] whose Segments is 0: lateness at
// most a tenth of the window.
const DefaultSegments = 10

func (FixedWindow) policy()   {}
func (SlidingWindow) policy() {}
func (TokenBucket) policy()   {}
func (GCRA) policy()          {}
func (Composite) policy()     {}

func (FixedWindow) component()   {}
func (SlidingWindow) component() {}
func (TokenBucket) component()   {}

// clonePolicy copies p into plain values: a pointer policy becomes the value it points to, and a
// Composite gets its own component list (of values), so that later changes by the caller, through
// the slice or a pointer, cannot reach the limiter or what Policy reports, and Policy's dynamic types
// are always the value types. Nil pointers are kept for compile to reject.
func clonePolicy(p Policy) Policy {
	switch v := p.(type) {
	case *FixedWindow:
		if v != nil {
			return *v
		}
	case *SlidingWindow:
		if v != nil {
			return *v
		}
	case *TokenBucket:
		if v != nil {
			return *v
		}
	case *GCRA:
		if v != nil {
			return *v
		}
	case *Composite:
		if v != nil {
			return clonePolicy(*v)
		}
	case Composite:
		comps := make([]Component, len(v.Components))
		for i, c := range v.Components {
			comps[i] = c
			if c == nil {
				continue
			}
			if cc, ok := clonePolicy(c).(Component); ok { // always: a component clones to a component
				comps[i] = cc
			}
		}
		return Composite{Components: comps}
	}
	return p
}
