package luakit

import (
	"context"
	"errors"
	"strconv"
)

// Operation names one public operation of a primitive for a [Hook]. It never carries keys, fields,
// owner or fencing tokens, endpoints or fingerprints, so a hook may record every field as is.
type Operation struct {
	// Primitive is the module that runs the operation: "lock", "lease", "rwlock", "semaphore",
	// "redlock", "latch", "leader", "idempotency", "counter", "ratelimit".
	Primitive string
	// Name is the operation's upper-case name, for example "LOCK ACQUIRE"; docs/hooks.md in the
	// repository lists every name with the calls it covers.
	Name string
	// Instance is the label the application gave the primitive with its WithInstance option; "" when none.
	Instance string
}

// HookOutcome is how an admitted operation ended, as reported to its [Completion].
type HookOutcome int

// The outcomes of an admitted operation. The zero value is not an outcome: a Completion is never
// called with it.
const (
	// OutcomeSucceeded: the operation returned no error. A negative answer (a busy lock, a denied
	// permit, a lost lease) is a success: the operation ran and answered.
	OutcomeSucceeded HookOutcome = iota + 1
	// OutcomeCanceled: the caller's context ended and the error says so (context.Canceled or
	// context.DeadlineExceeded).
	OutcomeCanceled
	// OutcomeFailed: any other error.
	OutcomeFailed
)

// String returns "succeeded", "canceled" or "failed" ("HookOutcome(n)" for any other value).
func (o HookOutcome) String() string {
	switch o {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeFailed:
		return "failed"
	}
	return "HookOutcome(" + strconv.Itoa(int(o)) + ")"
}

// OutcomeOf classifies the error err a public operation returned to a caller whose context was ctx:
// nil is [OutcomeSucceeded]; an error matching context.Canceled or context.DeadlineExceeded while
// ctx has ended is [OutcomeCanceled]; anything else is [OutcomeFailed].
func OutcomeOf(ctx context.Context, err error) HookOutcome {
	switch {
	case err == nil:
		return OutcomeSucceeded
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return OutcomeCanceled
	}
	return OutcomeFailed
}

// Completion receives the outcome of an admitted operation, exactly once, after the caller's result
// is known and before it is returned. err is the error the caller gets (nil on success). It runs on
// the caller's goroutine and must not block.
type Completion func(outcome HookOutcome, err error)

// Hook observes and admits the public operations of a primitive (configured with the primitive's
// WithHooks option). Admit runs before any I/O or state change of the operation, on the caller's
// goroutine, with the caller's context:
//
//   - a non-nil error rejects the operation: the caller gets that error unchanged, nothing is sent
//     and nothing changes (a rejected renewal or release keeps the lease; a rejected Close can be
//     retried);
//   - otherwise the returned context (nil: the caller's) carries the operation, so a hook can start
//     a span in it, and the returned Completion (nil: nothing to report) is called exactly once with
//     the operation's outcome.
//
// Work an operation does internally (script retries, waiting loops, cleanup owed after an admitted
// attempt, queue pumping) is covered by that one admission; operations a hook itself starts get
// their own admission. Admit may be called concurrently and must be safe for concurrent use.
type Hook interface {
	Admit(ctx context.Context, op Operation) (context.Context, Completion, error)
}

// AttemptObserver may be implemented by a [Hook] to see each attempt of the acquisitions it admitted:
// every run of the acquire script, including the retries that one admission covers (a waiting
// Acquire's attempts), with the attempt's context (derived from the one Admit returned) and nil when
// the server answered (granted, or held by another owner), else the attempt's error, retried or
// returned. It admits nothing and must not block; it runs on the caller's goroutine. The primitives
// built on luakit/ownership (lock, lease, rwlock, semaphore) report their attempts.
type AttemptObserver interface {
	ObserveAttempt(ctx context.Context, err error)
}

// HookFunc adapts a function to a [Hook].
type HookFunc func(ctx context.Context, op Operation) (context.Context, Completion, error)

// Admit calls f.
func (f HookFunc) Admit(ctx context.Context, op Operation) (context.Context, Completion, error) {
	return f(ctx, op)
}

// Hooks composes hooks in order: [Hooks.Begin] admits an operation with each hook in turn, each
// seeing the context the previous one returned, and [Scope.End] completes them in reverse order. A
// nil or empty Hooks admits everything without allocating. Nil entries are skipped.
type Hooks []Hook

// Begin admits op with every hook in order and returns the context to run the operation with and its
// scope; call [Scope.End] exactly once with the caller's result when it is known. When hook k rejects,
// hooks 0..k-1 are completed, in reverse order, with [OutcomeFailed] and the rejection error, and
// Begin returns that error unchanged (the returned Scope is then inert). With no hooks it returns ctx
// and a zero Scope, and allocates nothing.
func (hs Hooks) Begin(ctx context.Context, op Operation) (context.Context, Scope, error) {
	if len(hs) == 0 {
		return ctx, Scope{}, nil
	}
	s := Scope{caller: ctx}
	for _, h := range hs {
		if h == nil {
			continue
		}
		next, done, err := h.Admit(ctx, op)
		if err != nil {
			s.complete(OutcomeFailed, err)
			return s.caller, Scope{}, err
		}
		if next != nil {
			ctx = next
		}
		if done != nil {
			if s.first == nil {
				s.first = done
			} else {
				s.rest = append(s.rest, done)
			}
		}
	}
	return ctx, s, nil
}

// Attempted reports one attempt's result to every hook that implements [AttemptObserver], in order.
// With no such hook it does nothing and allocates nothing.
func (hs Hooks) Attempted(ctx context.Context, err error) {
	for _, h := range hs {
		if o, ok := h.(AttemptObserver); ok {
			o.ObserveAttempt(ctx, err)
		}
	}
}

// Scope is one admitted operation's pending completions, from [Hooks.Begin]. The zero Scope (no hooks)
// does nothing. A Scope must be ended once and not copied after use.
type Scope struct {
	caller context.Context // the caller's context, for OutcomeCanceled
	first  Completion
	rest   []Completion
}

// End reports the caller's result err (nil on success) to every completion, in reverse admission
// order, classified by [OutcomeOf] against the caller's context. A second End does nothing.
func (s *Scope) End(err error) {
	if s.first == nil {
		return
	}
	s.complete(OutcomeOf(s.caller, err), err)
}

// EndWith is [Scope.End] with the outcome chosen by the primitive, for an error that is a negative
// answer rather than a failure (a busy lock's ErrNotAcquired is OutcomeSucceeded).
func (s *Scope) EndWith(o HookOutcome, err error) {
	if s.first == nil {
		return
	}
	s.complete(o, err)
}

func (s *Scope) complete(o HookOutcome, err error) {
	for i := len(s.rest) - 1; i >= 0; i-- {
		s.rest[i](o, err)
	}
	if s.first != nil {
		s.first(o, err)
	}
	s.first, s.rest = nil, nil
}
