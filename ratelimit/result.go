package ratelimit

import (
	"strconv"
	"time"
)

// Reason says why a request was not admitted.
type Reason string

// The reasons of [Result.Reason]. They are also the values of the reason attribute of the
// coordkit.rate_limit.blocked metric.
const (
	// ReasonNone: the request was admitted.
	ReasonNone Reason = ""
	// ReasonCapacity: not enough permits (including a request larger than the capacity, and a queued
	// request rejected or evicted because the local queue was full).
	ReasonCapacity Reason = "capacity"
	// ReasonDenyList: the limiter's identity is on its deny list; no capacity was touched.
	ReasonDenyList Reason = "deny_list"
)

// Result is the outcome of one admission decision. The zero value is a rejection with no retry hint.
type Result struct {
	// Allowed reports whether the n permits were granted. Permits are consumptive: only an explicit
	// [Limiter.Refund] (or [Keyed.Refund]) gives them back.
	Allowed bool
	// Reason is ReasonNone when Allowed, otherwise why not.
	Reason Reason
	// Remaining is the number of permits available after this decision, from this reply (for a
	// composite, those of the component reported in Component). It is not a fresh global
	// observation. 0 for a deny-list
	// rejection and for other rejections decided without the server (see At), except a queue
	// rejection of a request that was attempted before, which keeps its last reply's value.
	Remaining int64
	// Limit is the capacity of the policy (of the component reported in Component for a composite).
	Limit int64
	// RetryAfter, when positive, is how long until the whole request (all n permits; one permit for
	// an n = 0 probe) could be admitted, computed from server time; competing callers may take the
	// capacity first. It is 0 when Allowed, when n exceeds the capacity (no retry can succeed: n is
	// above the policy's capacity, or above the Limit of the settings the server applied, as for a
	// [Keyed] key decided by stored settings of a higher version with a smaller capacity), and for
	// deny-list rejections. A request rejected or evicted by a full local queue after an attempt
	// keeps that attempt's RetryAfter, counted down to the rejection.
	RetryAfter time.Duration
	// Reset is how long until the policy (its controlling component) is back at full capacity if
	// nothing else is admitted, from the server's reply; 0 when it already is, and 0 (unknown) for a
	// decision made without the server (see At: n above the capacity, deny-list rejections, queue
	// rejections of a request that never reached the server), whatever the key's state. Used for
	// the IETF RateLimit "t" parameter.
	Reset time.Duration
	// At is the server clock when the decision was made (microsecond precision); the zero time for
	// decisions made without the server (n above the capacity, deny-list rejections, queue
	// rejections of a request that never reached the server). A request rejected or evicted by the
	// queue after an attempt reports that attempt's At (and its Remaining, Limit and Reset).
	At time.Time
	// Component is the index in [Composite.Components] of the controlling component: when Allowed, the
	// one with the lowest Remaining (the first on ties); when rejected by the server, the rejecting
	// component with the longest wait (the first on ties: the one the request waits for, whose wait is
	// RetryAfter); for n above the capacity, decided without the server, the component with the
	// smallest Limit. 0 for standalone policies.
	Component int
}

// Stats describes one [Limiter] instance (not the shared state in the server).
type Stats struct {
	// Granted and Rejected count final outcomes of this instance's AllowN and WaitN calls (each call
	// counts once, whatever n and however many queued retries it took). Errors and cancellations are
	// not counted.
	Granted, Rejected int64
	// Queued is the number of permits currently waiting in the local queue.
	Queued int64
	// Available is the Remaining of the latest server reply; -1 before the first reply.
	Available int64
}

// UpdateMode selects how [Limiter.Update] treats the state stored in the server. The zero value is
// invalid (Update rejects it with [ErrInvalidUpdate]): the mode must be chosen explicitly, because
// exactly one process may migrate a change.
type UpdateMode int

const (
	// Adopt changes only this instance's settings, with no I/O: for every other process after one has
	// migrated.
	Adopt UpdateMode = iota + 1
	// Migrate converts the stored usage to the new settings in one script (see the package
	// documentation's table) and then adopts them locally. Exactly one process must migrate a change.
	Migrate
)

// String returns "adopt" or "migrate", or "UpdateMode(n)" for any other value.
func (m UpdateMode) String() string {
	switch m {
	case Adopt:
		return "adopt"
	case Migrate:
		return "migrate"
	}
	return "UpdateMode(" + strconv.Itoa(int(m)) + ")"
}

// QueueOrder is the order in which the local wait queue admits waiting requests. The zero value is
// [OldestFirst], the safe choice: it never evicts a waiting request.
type QueueOrder int

const (
	// OldestFirst serves the oldest waiting request first; when the queue is full, new requests are
	// rejected.
	OldestFirst QueueOrder = iota
	// NewestFirst serves the newest waiting request first; when the queue is full, the oldest waiting
	// requests are evicted (rejected) to make room. A request whose retry is in flight is not evicted;
	// when evicting the others cannot make room, the new request is rejected.
	NewestFirst
)

// String returns "oldest_first" or "newest_first", or "QueueOrder(n)" for any other value.
func (o QueueOrder) String() string {
	switch o {
	case OldestFirst:
		return "oldest_first"
	case NewestFirst:
		return "newest_first"
	}
	return "QueueOrder(" + strconv.Itoa(int(o)) + ")"
}
