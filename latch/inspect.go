package latch

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Status is the state of a latch's current generation as [Latches.Inspect] reports it. Its zero value
// "" is no state: the inspection found no latch ([Inspection].Exists false).
type Status string

const (
	// StatusOpen means the count is above zero and the generation was neither aborted nor expired.
	StatusOpen Status = "open"
	// StatusComplete means the count reached zero; waiters return nil.
	StatusComplete Status = "complete"
	// StatusAborted means the generation was aborted (see [Inspection.Reason]).
	StatusAborted Status = "aborted"
	// StatusExpired means the generation's [WithExpiry] deadline passed before it completed.
	StatusExpired Status = "expired"
)

// Inspection is what [Latches.Inspect] reports about one latch key at one instant: a small value for
// operators and dashboards. Its zero value (Exists false) describes an absent key.
type Inspection struct {
	// Exists reports whether a latch is at the key; false when it was never created, was deleted, or
	// was evicted, and every other field is then zero.
	Exists bool
	// Status is the current generation's state; "" when not Exists.
	Status Status
	// Generation is the current generation's id (opaque, random, never reused); "" when absent. Pass it
	// to [Latches.ForceDelete] to delete exactly the generation inspected.
	Generation string
	// Count is the number of signals still pending (≥ 0); Initial the count the generation started with.
	Count, Initial int64
	// Reason is the abort reason (StatusAborted only).
	Reason string
	// ExpiresAt is the generation's server-time deadline; the zero time when it has none.
	ExpiresAt time.Time
	// Remaining is ExpiresAt minus the server time when read, never negative; 0 without a deadline.
	Remaining time.Duration
}

// Inspect reads the latch at key (after the prefix) without changing it: one read-only script reads the
// generation, counts, expiry and abort reason with the server time, atomically. Nothing is written and
// no expiry changes (PTTL before and after are equal); no waiter is woken. An absent key is not an
// error (Exists false). The read counts as an access for the server's LRU/LFU eviction.
//
// It fails before any I/O with an error matching luakit.ErrInvalidConfig for an empty key; with an
// error wrapping [ErrForeignData] when the key holds anything that is not a latch; or with the client's
// error (a timeout or cancellation changes nothing). It blocks for one round trip, bounded by ctx.
// Safe for concurrent use.
func (ls *Latches) Inspect(ctx context.Context, key string) (Inspection, error) {
	ctx, sc, err := ls.cfg.hooks.Begin(ctx, ls.op(opInspect))
	if err != nil {
		return Inspection{}, err
	}
	in, err := ls.inspect(ctx, key)
	ls.endAnswer(&sc, err)
	return in, err
}

func (ls *Latches) inspect(ctx context.Context, key string) (Inspection, error) {
	pkey, err := ls.physical(key)
	if err != nil {
		return Inspection{}, err
	}
	st, err := ls.readState(ctx, pkey)
	if err != nil {
		return Inspection{}, fmt.Errorf("latch: inspect: %w", luakit.MarkForeign(err))
	}
	switch st.kind {
	case "none":
		return Inspection{}, nil
	case "other":
		return Inspection{}, fmt.Errorf("latch: inspect: %w", ErrForeignData)
	}
	in := Inspection{Exists: true, Generation: st.gen, Count: st.count, Initial: st.initial, Status: StatusOpen}
	if st.expires > 0 {
		in.ExpiresAt = time.UnixMilli(st.expires)
		in.Remaining = time.Duration(max(st.expires-st.now, 0)) * time.Millisecond
	}
	switch {
	case st.aborted:
		in.Status, in.Reason = StatusAborted, st.reason
	case st.count == 0:
		in.Status = StatusComplete
	case st.expires > 0 && st.now >= st.expires:
		in.Status = StatusExpired
	}
	return in, nil
}

// ForceDelete deletes the latch at key when it still holds generation (as read by [Latches.Inspect]),
// whatever its state (open, complete, aborted or expired): an operator's action for a stuck latch. Its
// waiters wake and return [ErrReplaced]. It reports whether it deleted the key; false means the key
// holds another generation or nothing, and nothing was written, so an operator never deletes a
// generation created after the inspection.
//
// It fails before any I/O with an error matching luakit.ErrInvalidConfig for an empty key or
// generation; with an error wrapping [ErrForeignData] when the key holds anything that is not a latch
// (left alone); with one wrapping [ErrUncertain] when the reply was lost (the key may or may not be
// gone). It blocks for one round trip (one script), bounded by ctx. Safe for concurrent use.
func (ls *Latches) ForceDelete(ctx context.Context, key, generation string) (bool, error) {
	ctx, sc, err := ls.cfg.hooks.Begin(ctx, ls.op(opForceDelete))
	if err != nil {
		return false, err
	}
	ok, err := ls.forceDelete(ctx, key, generation)
	ls.endAnswer(&sc, err)
	return ok, err
}

func (ls *Latches) forceDelete(ctx context.Context, key, generation string) (bool, error) {
	pkey, err := ls.physical(key)
	if err != nil {
		return false, err
	}
	if generation == "" {
		return false, luakit.InvalidConfig("latch", "generation is empty")
	}
	l := &Latch{ls: ls, key: key, pkey: pkey, gen: generation}
	return l.del(ctx)
}
