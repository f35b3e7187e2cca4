package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Inspection is a read-only view of one limiter key's shared state in the server, taken by
// [Limiter.Inspect] or [Keyed.Inspect] with the inspecting instance's policy. It describes the key as
// a one-permit request would find it at server time At; nothing was consumed or written.
type Inspection struct {
	// Policy is the policy the state was evaluated with (the instance's current settings), as a copy
	// made of plain values (see [Limiter.Policy]).
	Policy Policy
	// Key is the key as given to [New] or to the Keyed call, without the [WithKeyPrefix] prefix.
	Key string
	// Exists reports whether the key holds state in the server. When false the key is at full
	// capacity: Remaining is Limit, Reset and RetryAfter are 0. A key with state may be at full
	// capacity too (state not yet expired).
	Exists bool
	// Remaining is the number of permits available now (for a composite, those of the component
	// reported in Component), as the RateLimit-Remaining header counts them: permits, not a
	// duration. It is Limit when the key holds no state.
	Remaining int64
	// Limit is the capacity of the component reported in Component (the policy's capacity for a
	// standalone policy).
	Limit int64
	// Reset is how long until that component is back at full capacity if nothing is admitted; 0 when
	// it already is.
	Reset time.Duration
	// RetryAfter is how long until one permit could be admitted; 0 when one can be now.
	RetryAfter time.Duration
	// At is the server clock of the inspection.
	At time.Time
	// Component is the index in [Composite.Components] of the controlling component: when a permit is
	// available now, the one with the lowest Remaining (the first on ties), otherwise the component
	// without a permit that waits longest (the first on ties; its wait is RetryAfter). 0 for
	// standalone policies.
	Component int
}

// ResetAt returns At + Reset: the server time at which the reported component is full again.
func (i Inspection) ResetAt() time.Time { return i.At.Add(i.Reset) }

// Read-only variants of the engine scripts: the same sources run by EVALSHA_RO / EVAL_RO (Redis 7.0+,
// Valkey), so the server itself refuses any write. The inspection path of each script (an n = 0
// probe) calls only GET, HGETALL and TIME.
var (
	componentsScriptRO = luakit.NewReadOnlyScript("components_ro", componentsScript.Source())
	gcraScriptRO       = luakit.NewReadOnlyScript("gcra_ro", gcraScript.Source())
)

// inspect runs c's probe read-only at key.
func (c *compiled) inspect(ctx context.Context, client rueidis.Client, key string) (decision, error) {
	if err := ctx.Err(); err != nil {
		return decision{}, fmt.Errorf("ratelimit: inspect: %w", err)
	}
	s := componentsScriptRO
	if c.algo == algoGCRA {
		s = gcraScriptRO
	}
	ctx, stop := luakit.WithoutDeadline(ctx)
	res := s.Exec(ctx, client, []string{key}, c.argsProbe)
	stop()
	return c.decodeResult(res)
}

func inspectionOf(p Policy, name string, d decision) Inspection {
	return Inspection{
		Policy:     p,
		Key:        name,
		Exists:     !d.absent,
		Remaining:  d.remaining,
		Limit:      d.limit,
		Reset:      d.reset,
		RetryAfter: d.retryAfter,
		At:         d.at,
		Component:  d.component,
	}
}

// Inspect reads the limiter's shared state in the server with its current policy, in one read-only
// script (one round trip, EVALSHA_RO): whether the key holds state, the permits remaining now, the
// reset and retry-after times of a one-permit request, and the server time. It consumes nothing, writes nothing and changes no TTL;
// it ignores the deny list and the local queue, and is not counted in [Stats] or the metrics.
//
// It blocks until the reply or until ctx ends. Errors: [ErrClosed] after Close; [ErrConfigMismatch]
// or [ErrForeignData] when the key holds other settings or data; the context's error; a server error
// (a server without EVAL_RO, older than Redis 7.0, replies with an unknown-command error). Each is
// wrapped with a "ratelimit: " prefix. Safe for concurrent use, also with Update (it uses the
// settings current when it starts).
func (l *Limiter) Inspect(ctx context.Context) (Inspection, error) {
	ctx, sc, err := l.hooks.Begin(ctx, op(opInspect, l.inst))
	if err != nil {
		return Inspection{}, err
	}
	res, err := l.inspect(ctx)
	sc.End(err)
	return res, err
}

func (l *Limiter) inspect(ctx context.Context) (Inspection, error) {
	if l.closedFlag.Load() {
		return Inspection{}, l.closedErr()
	}
	l.mu.Lock()
	c, p := l.cur, l.pol
	l.mu.Unlock()
	d, err := c.inspect(ctx, l.client, l.key)
	if err != nil {
		return Inspection{}, err
	}
	return inspectionOf(clonePolicy(p), l.name, d), nil
}

// Inspect reads key's shared state in the server with the Keyed's current policy; see
// [Limiter.Inspect]. key must not be empty (an error wrapping luakit.ErrEmptyKey, matching
// [ErrInvalidConfig], before any I/O). It creates no local state for key. Safe for concurrent use.
func (k *Keyed) Inspect(ctx context.Context, key string) (Inspection, error) {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opInspect, k.cfg.instance))
	if err != nil {
		return Inspection{}, err
	}
	res, err := k.inspect(ctx, key)
	sc.End(err)
	return res, err
}

func (k *Keyed) inspect(ctx context.Context, key string) (Inspection, error) {
	if key == "" {
		return Inspection{}, errEmptyKey
	}
	if k.isClosed() {
		return Inspection{}, errClosed
	}
	c, p := k.current()
	d, err := c.inspect(ctx, k.client, k.cfg.keys.Key(key))
	if err != nil {
		return Inspection{}, err
	}
	return inspectionOf(clonePolicy(p), key, d), nil
}
