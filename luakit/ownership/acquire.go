package ownership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Reply is what a primitive's acquire script answered, as its [Acquirer] decodes it. Exactly one of
// Granted, Busy and Err is set.
type Reply struct {
	// Granted: the script granted this attempt's owner its hold.
	Granted bool
	// Busy: others hold the resource; HolderTTL is how long until their hold ends if nobody renews it
	// (negative: no expiry, or unknown).
	Busy      bool
	HolderTTL time.Duration
	// Err is a refusal the script answered before writing anything (a corrupt fence counter, a
	// capacity mismatch, a hash with key-level expiry): returned as it is, never retried, no cleanup.
	Err error
}

// Acquirer is one acquisition of a primitive's hold, driven by [Config.Try]. It is usually a field of
// the handle the acquisition will return (its backend), so that an attempt allocates nothing more than
// the handle. Its methods are called from one goroutine, one attempt at a time.
type Acquirer interface {
	// SendAcquire sends the acquire script once with the attempt's owner token, through [Config.Send]
	// or [Config.SendTracked], and returns what they return.
	SendAcquire(ctx context.Context) Sent
	// DecodeAcquire reads an answered reply. An error means the reply is malformed: the script may
	// have written a hold that cannot be read back, so the attempt's cleanup is sent.
	DecodeAcquire(msg rueidis.RedisMessage) (Reply, error)
	// GrantAcquire starts the handle of a hold granted to the attempt sent at start ([Handle.Grant]);
	// it returns [luakit.ErrLateReply], after the owner-checked cleanup, for a reply that came after
	// the local estimate elapsed.
	GrantAcquire(ctx context.Context, start time.Time) error
	// ReleaseAcquire removes the attempt's hold if the server holds it (the owner-checked cleanup; a
	// [Backend]'s Release for the attempt's owner token).
	ReleaseAcquire(ctx context.Context) (removed bool, err error)
}

// Try sends one acquisition attempt through a and says what it means (Busy, Retry, Err, and whether
// the owner-checked cleanup was sent), by the one rule for every primitive written row by row in the
// package documentation, "Acquisition attempts". It blocks for the attempt and any cleanup; a ctx
// already ended sends nothing.
//
// Errors are prefixed "<Name>: <op>: ". A [Waiter] acts on Busy and Retry; a try-acquisition returns
// Err (nil when acquired). Each attempt is reported to the [luakit.AttemptObserver]s among c.Hooks
// ([luakit.Hooks.Attempted]): nil when the server answered (granted or busy), else Err.
func (c *Config) Try(ctx context.Context, op string, a Acquirer) TryResult {
	at := c.try(ctx, op, a)
	if len(c.Hooks) > 0 {
		err := at.Err
		if at.Busy {
			err = nil // held by another owner: an answer, not a failure
		}
		c.Hooks.Attempted(ctx, err)
	}
	return at
}

func (c *Config) try(ctx context.Context, op string, a Acquirer) TryResult {
	if err := ctx.Err(); err != nil {
		return TryResult{Err: c.acquireErr(op, err)}
	}
	sent := a.SendAcquire(ctx)
	msg, err := sent.Resp.ToMessage()
	if err != nil {
		switch {
		case luakit.IsUncertain(err):
			settled := Cleanup(ctx, c, a.ReleaseAcquire)
			return TryResult{Retry: settled && ctx.Err() == nil, Err: fmt.Errorf("%s: %s: %w: %w", c.name(), op, luakit.ErrUncertain, err)}
		case luakit.MayHaveApplied(err):
			Cleanup(ctx, c, a.ReleaseAcquire)
			return TryResult{Err: c.acquireErr(op, err)}
		}
		return TryResult{Retry: luakit.IsTransient(err), Err: c.acquireErr(op, luakit.MarkForeign(err))}
	}
	r, err := a.DecodeAcquire(msg)
	switch {
	case err != nil:
		// The script ran and may have written a hold that cannot be read back: uncertain.
		Cleanup(ctx, c, a.ReleaseAcquire)
		return TryResult{Err: fmt.Errorf("%s: %s: %w: malformed reply: %w", c.name(), op, luakit.ErrUncertain, err)}
	case r.Err != nil:
		return TryResult{Err: r.Err}
	case r.Busy:
		return TryResult{Busy: true, HolderTTL: r.HolderTTL, Tracked: sent.Tracked, Err: luakit.ErrNotAcquired}
	case !r.Granted:
		Cleanup(ctx, c, a.ReleaseAcquire)
		return TryResult{Err: fmt.Errorf("%s: %s: %w: malformed reply: neither a grant nor busy", c.name(), op, luakit.ErrUncertain)}
	case sent.Ack != nil:
		// Granted on the primary but not acknowledged as Config.Ack asks: not a grant. Never retried
		// (the replicas lag or are missing; the caller decides).
		Cleanup(ctx, c, a.ReleaseAcquire)
		return TryResult{Err: c.acquireErr(op, sent.Ack)}
	}
	if err := a.GrantAcquire(ctx, sent.Start); err != nil {
		return TryResult{Retry: errors.Is(err, luakit.ErrLateReply), Err: c.acquireErr(op, err)}
	}
	return TryResult{}
}

// Pair reads the status row {status, value} that acquire scripts answer with (luakit's reply
// convention: status one of luakit's Status constants; value as the script defines it), for an
// Acquirer's DecodeAcquire. An error means the reply is malformed.
func Pair(msg rueidis.RedisMessage) (status int64, value rueidis.RedisMessage, err error) {
	arr, err := msg.ToArray()
	if err != nil {
		return 0, value, err
	}
	if len(arr) != 2 {
		return 0, value, fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	if status, err = arr[0].AsInt64(); err != nil {
		return 0, value, fmt.Errorf("status: %w", err)
	}
	return status, arr[1], nil
}

// CleanupOwed is [Config.Try]'s rule for whether a failed attempt needs its owner-checked cleanup, for
// a primitive that sends its attempts itself (redlock's per-node fan-out applies it to each node):
// replyErr is the reply's error (rueidis' ToMessage), nil when the server answered; malformed reports
// that an answered reply could not be read (not a refusal the script answered). The cleanup is owed
// after no reply or an error of unknown kind ([luakit.MayHaveApplied]) and after a malformed reply;
// never after an error reply, a refused dial ([luakit.NotSent]) or an answered refusal.
func CleanupOwed(replyErr error, malformed bool) bool {
	if replyErr != nil {
		return luakit.MayHaveApplied(replyErr)
	}
	return malformed
}

// acquireErr prefixes an acquisition's error with the primitive's name and op.
func (c *Config) acquireErr(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", c.name(), op, err)
}
