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
// The fields state their ranges. The stored state, and how an update with [Migrate] converts it: see
// the package documentation, "Algorithms" and "Updating settings at runtime".
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
// Window: never early, at most one segment (w−1µs) late. RetryAfter of a rejection is the time until
// enough of the oldest segments expire for the whole request, so at most Window plus one segment.
// More segments shrink the lateness and cost one hash field each: [DefaultSegments] (10) keeps it
// within a tenth of the window (a 10s window: at most 1s late); Segments 1 makes a rejection last up
// to nearly twice the window.
//
// The fields state their ranges. The stored state, and how an update with [Migrate] converts it: see
// the package documentation, "Algorithms" and "Updating settings at runtime".
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
// The fields state their ranges; the full refill duration (ceil(Limit/TokensPerPeriod) periods) must
// also be at most MaxSpan. A Period below 1ms refills more than 1000 times a second exactly. The
// stored state, and how an update with [Migrate] converts it: see the package documentation,
// "Algorithms" and "Updating settings at runtime".
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
// The fields state their ranges; Burst × EmissionInterval must also be at most MaxSpan (an interval
// below 1ms admits more than 1000 permits a second on one key, exactly). How an update with [Migrate]
// rescales the debt: see the package documentation, "Updating settings at runtime".
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
// capacity. Standalone limiters use other layouts and cannot share the key ([ErrForeignData]). An
// update with [Migrate] converts each component by its own rule and stores the new signature, in one
// script (see the package documentation, "Updating settings at runtime").
type Composite struct {
	// Components are the limits applied together, 1 to MaxComponents non-nil values, each valid on
	// its own, in a fixed order (the order is part of the stored signature). The slice is copied by
	// New and Update.
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
