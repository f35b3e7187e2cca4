package ratelimit

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// The operation names of the package's hooks ([WithHooks]); docs/hooks.md in the repository lists
// them with the calls they cover.
const (
	opAcquire = "RATE LIMIT ACQUIRE"
	opUpdate  = "RATE LIMIT UPDATE"
	opReset   = "RATE LIMIT RESET"
	opRefund  = "RATE LIMIT REFUND"
	opInspect = "RATE LIMIT INSPECT"
)

// op is the hook operation name with the instance name inst.
func op(name, inst string) luakit.Operation {
	return luakit.Operation{Primitive: "ratelimit", Name: name, Instance: inst}
}

// endDecision completes an acquisition's scope: a call that returns a decision (admitted or not,
// including a wait that ends with ErrDenied, ErrExceedsCapacity or ErrQueueFull) succeeded; a wait
// that returned early because its next admission would come after the caller's deadline was
// canceled by that deadline (the caller's context has not ended yet, so End would call it failed).
func endDecision(sc *luakit.Scope, err error) {
	if err == nil {
		sc.End(nil)
		return
	}
	switch {
	case errors.Is(err, ErrDenied) || errors.Is(err, ErrExceedsCapacity) || errors.Is(err, ErrQueueFull):
		sc.EndWith(luakit.OutcomeSucceeded, err)
	case errors.Is(err, errPastDeadline):
		sc.EndWith(luakit.OutcomeCanceled, err)
	default:
		sc.End(err)
	}
}

// WithHooks adds hooks that admit and observe the public operations of a [Limiter] or a [Keyed] (see
// [luakit.Hook]; primitive "ratelimit"): RATE LIMIT ACQUIRE for Allow, AllowN, Wait and WaitN (one
// operation however many retries a wait makes; admitted before the deny list or the queue is touched;
// a call that returns a decision, admitted or not, succeeded, as does a wait ending with [ErrDenied],
// [ErrExceedsCapacity] or [ErrQueueFull], while one ending early because its next admission would come
// after ctx's deadline is canceled); RATE LIMIT UPDATE, RESET, REFUND and INSPECT for the calls of
// those names. Deny-list checks, retries, queue pumping and cleanups are part of the admitted call; a
// bound deny list runs only its own hooks (denylist.WithHooks), on calls made on it directly. Hooks
// compose in order across calls. Default: none, and operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) SharedOption {
	return sharedOption(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels the limiter in its hooks ([luakit.Operation].Instance) and metrics (the
// attribute coordkit.instance on coordkit.rate_limit.allowed and coordkit.rate_limit.blocked, omitted
// when instance is ""). It must not be a key, an identity or a token. Default "".
func WithInstance(instance string) SharedOption {
	return sharedOption(func(c *config) error { c.instance = instance; return nil })
}

// AttrInstance is the attribute key of the instance label ([WithInstance]) on the package's instruments.
const AttrInstance = "coordkit.instance"
