package leader

import (
	"context"
	"strconv"
	"time"
)

// Term is one tenure of this candidate as leader: an immutable value, safe to copy and share.
//
// The zero Term (returned by [Election.Current] when not leading) has FencingToken 0 and a Context that
// is already cancelled (its Err is context.Canceled).
type Term struct {
	// FencingToken is the positive fencing token of the term's lease, issued by the fence counter and
	// strictly greater than every earlier term's token in one retained Redis history. Send it with every
	// protected write; the resource must reject writes whose token is lower than the highest it accepted.
	FencingToken int64

	// Elected is when this process learned it won the term (local clock, with a monotonic reading).
	Elected time.Time

	owner string
	ctx   context.Context
}

// Context returns the term's context, cancelled when the term is revoked; context.Cause gives the
// reason, luakit's shared handle causes: [ErrLost] (a renewal was refused), [ErrExpired] (no renewal
// confirmed in time: self-fencing), [ErrReleased] (the elected callback returned), or else the cause
// of Run's context. Derive the leader's work from it.
func (t Term) Context() context.Context {
	if t.ctx == nil {
		return cancelledCtx
	}
	return t.ctx
}

// Err returns nil while the term is current, then the reason it was revoked (see [Term.Context]).
func (t Term) Err() error {
	c := t.Context()
	if c.Err() == nil {
		return nil
	}
	return context.Cause(c)
}

// cancelledCtx is the context of the zero Term: cancelled, with cause context.Canceled.
var cancelledCtx = func() context.Context {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c
}()

// State is the kind of a leadership [Change].
type State int

// The states reported to observers and as the state attribute of [MetricChanges].
const (
	// Elected: this candidate won a term.
	Elected State = iota + 1
	// Revoked: this candidate's term ended (its context was cancelled).
	Revoked
)

// String returns "elected" or "revoked", and "State(n)" for any other value.
func (s State) String() string {
	switch s {
	case Elected:
		return "elected"
	case Revoked:
		return "revoked"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Change is one leadership change of this candidate, as reported to [OnChange] observers.
type Change struct {
	State State
	Term  Term
	// Cause is why the term was revoked (nil for Elected); see [Term.Context].
	Cause error
}
