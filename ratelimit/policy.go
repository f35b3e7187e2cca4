package ratelimit

import "time"

// Policy is the settings of one limiter: a [FixedWindow], [SlidingWindow], [TokenBucket], [GCRA] or
// [Composite] value. Policies are plain immutable values; [New] validates them and rounds every
// duration up to whole milliseconds. The set of implementations is closed.
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
// acquisition after the previous one ended (not at a wall-clock boundary) and lasts Window.
//
// Limit must be in [1, MaxLimit]. Window must be at least 1ms and is rounded up to whole
// milliseconds.
type FixedWindow struct {
	Limit  int64
	Window time.Duration
}

// SlidingWindow admits at most Limit permits in any rolling Window, tracked in Segments segments of
// Window/Segments each (rounded up to whole milliseconds). A permit is charged to the segment that ends
// after its acquisition and is released at that segment's end plus Window: never early, at most one
// segment late. More segments shrink that delay and cost one hash field each.
//
// Limit must be in [1, MaxLimit]; Segments in [1, 1024] (0 means 1); Window at least 1ms, rounded up
// to whole milliseconds; twice the window must fit in a time.Duration.
type SlidingWindow struct {
	Limit    int64
	Window   time.Duration
	Segments int
}

// TokenBucket holds at most Limit tokens and adds TokensPerPeriod tokens at the end of every Period.
// A new bucket starts full. Elapsed partial periods are kept: a request between refills does not
// reset the refill clock.
//
// Limit and TokensPerPeriod must be in [1, MaxLimit]; Period at least 1ms, rounded up to whole
// milliseconds; the full refill duration (ceil(Limit/TokensPerPeriod) periods) must fit in a
// time.Duration.
type TokenBucket struct {
	Limit           int64
	TokensPerPeriod int64
	Period          time.Duration
}

// GCRA is the Generic Cell Rate Algorithm: up to Burst permits at once, then one permit per
// EmissionInterval. Burst is the total capacity, not an allowance above the steady rate. The state is
// one theoretical arrival time (TAT) and expires once the full burst is available again.
//
// Burst must be in [1, MaxLimit]; EmissionInterval at least 1ms, rounded up to whole milliseconds;
// Burst × EmissionInterval must fit in a time.Duration.
//
// Source: the ATM Forum Traffic Management Specification 4.0 (virtual scheduling form), as in
// Brandur Leach's "Rate limiting, cells, and GCRA" and go-redis/redis_rate.
type GCRA struct {
	Burst            int64
	EmissionInterval time.Duration
}

// Composite applies 1 to 32 component limits to one key atomically: a request is admitted only if
// every component admits it, and then consumes from every component. The order of Components is part
// of the configuration signature stored with the state; every process sharing the key must use the
// same ordered list.
type Composite struct {
	Components []Component
}

// MaxLimit is the largest permit count a policy accepts (2^50): permit arithmetic runs in Lua's
// double-precision numbers, which are exact up to 2^53.
const MaxLimit = int64(1) << 50

// MaxComponents is the largest number of components in a [Composite].
const MaxComponents = 32

// MaxSegments is the largest number of segments of a [SlidingWindow].
const MaxSegments = 1024

func (FixedWindow) policy()   {}
func (SlidingWindow) policy() {}
func (TokenBucket) policy()   {}
func (GCRA) policy()          {}
func (Composite) policy()     {}

func (FixedWindow) component()   {}
func (SlidingWindow) component() {}
func (TokenBucket) component()   {}
