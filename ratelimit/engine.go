package ratelimit

// This file is the contract between the Lua engine (engine_*.go, *.lua) and the limiter
// (limiter.go, queue.go, keyed.go). The engine owns validation, rounding, signatures, decisions and
// migrations; the limiter owns local state.

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// compiled is a validated policy with durations in whole microseconds. It is immutable and safe for
// concurrent use.
type compiled struct {
	src  Policy // the policy enforced: durations rounded up to whole µs
	algo algo
	// comps holds the components of a composite, or the single component of a standalone fixed
	// window, sliding window or token bucket; nil for GCRA.
	comps []component
	// burst and emission (µs) are the GCRA settings.
	burst, emission int64

	cap    int64 // capacity(): the smallest component limit (GCRA: burst)
	capIdx int   // index of the component with the smallest limit (first on ties)

	// sig is the canonical text of the rounded settings: equal settings have equal sig. For a
	// composite it is the configuration signature stored with the state.
	sig string
	// block is the settings part of the script's ARGV (see engine_components.lua, engine_gcra.lua);
	// argsProbe and argsOne are the complete decide ARGV for n = 0 and n = 1, shared read-only.
	block              []string
	argsProbe, argsOne []string

	// keyed selects the keyed form of the decide script (see keyedFor); keyedArgs is its ARGV
	// without the mode and n ("k", n, keyedArgs...; for GCRA keyedArgs[0], n, keyedArgs[1:]).
	keyed     bool
	keyedArgs []string
}

// compile validates p and rounds its durations up to whole microseconds (c.src is the rounded policy). It returns an error wrapping
// ErrInvalidPolicy naming the bad field. It does no I/O.
func compile(p Policy) (*compiled, error) { return compilePolicy(p) }

// capacity is the largest n a single decision can ever admit (the minimum over components).
func (c *compiled) capacity() int64 { return c.cap }

// equal reports whether c and o are the same settings after rounding.
func (c *compiled) equal(o *compiled) bool {
	return c != nil && o != nil && c.algo == o.algo && c.sig == o.sig
}

// compatible reports whether o can replace c by Update (same algorithm; for composites the same
// number and algorithm of each component). The error wraps ErrInvalidUpdate.
func (c *compiled) compatible(o *compiled) error { return compatibleWith(c, o) }

// decision is one server reply.
type decision struct {
	allowed    bool
	absent     bool          // the key held no state (only a probe, n = 0, reports it)
	remaining  int64         // available permits of the controlling component after the decision
	limit      int64         // capacity of the controlling component (see Result.Component)
	retryAfter time.Duration // >0 only when !allowed and a retry can succeed
	reset      time.Duration // until the controlling component is back at full capacity
	component  int           // index of the controlling component (0 for standalone)
	at         time.Time     // server clock of the decision (µs precision); zero when decided locally
}

// decide runs one script (one round trip) deciding n permits (n >= 0; n == 0 probes and writes
// nothing). n > capacity is decided locally: not allowed, no RetryAfter, no I/O. Server errors map to
// the package's errors (ErrConfigMismatch, ErrForeignData); transport failures after sending wrap
// ErrUncertain.
func (c *compiled) decide(ctx context.Context, client rueidis.Client, key string, n int64) (decision, error) {
	return c.run(ctx, client, key, n)
}

// migrate converts the stored state at key from c's settings to to's in one script. An absent key
// stays absent. Validation rejections (ErrConfigMismatch, ErrDebtOverflow, ErrForeignData) wrote nothing.
func (c *compiled) migrate(ctx context.Context, client rueidis.Client, key string, to *compiled) error {
	return c.convert(ctx, client, key, to)
}
