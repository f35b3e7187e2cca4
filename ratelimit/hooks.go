package ratelimit

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// The operation names of the package's hooks ([WithHooks]); docs/hooks.md in the repository lists
// them with the calls they cover.
const (
	opAcquire     = "RATE LIMIT ACQUIRE"
	opUpdate      = "RATE LIMIT UPDATE"
	opReset       = "RATE LIMIT RESET"
	opRefund      = "RATE LIMIT REFUND"
	opInspect     = "RATE LIMIT INSPECT"
	opDenyRead    = "RATE LIMIT DENY LIST READ"
	opDenyWrite   = "RATE LIMIT DENY LIST WRITE"
	opDenyEntries = "RATE LIMIT DENY LIST ENTRIES"
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

// CommonOption is an option of [New], [NewKeyed] and [NewDenyList] alike: it is an [Option], a
// [KeyedOption] and a [DenyListOption].
type CommonOption interface {
	LimiterOption
	DenyListOption
}

// commonOption applies to the three configurations.
type commonOption struct {
	lim  func(*config) error
	deny func(*denyConfig) error
}

func (o commonOption) applyLimiter(c *config) error  { return o.lim(c) }
func (o commonOption) applyKeyed(c *config) error    { return o.lim(c) }
func (o commonOption) applyDeny(c *denyConfig) error { return o.deny(c) }

// WithHooks adds hooks that admit and observe the public operations of a [Limiter], a [Keyed] or a
// [DenyList] (see [luakit.Hook]; primitive "ratelimit"):
//
//   - RATE LIMIT ACQUIRE: Allow, AllowN, Wait and WaitN (one operation however many retries a wait
//     makes, queued or not). It is admitted before the deny list's cache is read, before the queue
//     changes and before anything is sent; a rejected admission returns the hook's error unchanged
//     and decides nothing. A call that returns a decision, admitted or not (including a wait ending
//     with [ErrDenied], [ErrExceedsCapacity] or [ErrQueueFull]), completes as
//     [luakit.OutcomeSucceeded]; one whose ctx ended as [luakit.OutcomeCanceled], and so is a wait
//     that returns early because its next admission would come after ctx's deadline; any other
//     error as [luakit.OutcomeFailed].
//   - RATE LIMIT UPDATE, RATE LIMIT RESET, RATE LIMIT REFUND, RATE LIMIT INSPECT: Update, Reset,
//     Refund and Inspect.
//   - RATE LIMIT DENY LIST READ, RATE LIMIT DENY LIST WRITE, RATE LIMIT DENY LIST ENTRIES:
//     [DenyList.IsDenied], [DenyList.SetDenied] and [DenyList.Entries].
//
// The deny-list checks a limiter makes itself, script retries, the queue's pumping and the cleanup
// of abandoned replies are part of the admitted call and create no scope of their own; a limiter's
// hooks are its own (a bound [DenyList] admits only the calls made on it directly). Close, Policy,
// Stats, Key, Keys and Invalidate are not operations. Hooks compose in order across calls. Default:
// none, and operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) CommonOption {
	return commonOption{
		lim:  func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil },
		deny: func(c *denyConfig) error { c.hooks = append(c.hooks, hooks...); return nil },
	}
}

// WithName names the limiter or deny list for hooks ([luakit.Operation].Instance) and, for a
// [Limiter] or a [Keyed], for metrics: the attribute coordkit.instance on
// coordkit.rate_limit.allowed and coordkit.rate_limit.blocked (omitted when name is ""). It must not
// be a key, an identity or a token. Default "".
func WithName(name string) CommonOption {
	return commonOption{
		lim:  func(c *config) error { c.name = name; return nil },
		deny: func(c *denyConfig) error { c.name = name; return nil },
	}
}

// AttrInstance is the attribute key of the instance name ([WithName]) on the package's instruments.
const AttrInstance = "coordkit.instance"
