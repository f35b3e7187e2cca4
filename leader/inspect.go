package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/lock"
)

// Inspection is what [Election.Inspect] reports about an election at one instant: a small value for
// operators and dashboards, read from the server, not from this process. It never carries the owner
// token. Its zero value (Exists false) describes an election that never had a leader.
type Inspection struct {
	// Exists reports whether some candidate (in any process) holds the leader lease.
	Exists bool
	// Remaining is the leader lease's remaining life on the server (PTTL, millisecond resolution);
	// 0 when no leader exists or NoExpiry. The leader renews it at half the lease duration.
	Remaining time.Duration
	// NoExpiry is true for a leader lease without expiry, which no candidate writes.
	NoExpiry bool
	// FencingToken is the fence counter's value: the current term's token while Exists (the last
	// one issued otherwise; the next term gets a higher one). 0 when no term was ever started.
	FencingToken int64
}

// Inspect reads the election's lease and fence keys without changing them: one read-only script
// ([lock.Locker.Inspect] on the election's keys), so nothing is written and PTTL before and after are
// equal. It works on an Election that is not running: create one with the same name and options as
// the candidates (callbacks are not needed) to inspect from an operator's tool. It does not tell which
// process leads: owner tokens are never read.
//
// It fails with an error wrapping [lock.ErrForeignData] when a key holds data the lock never writes,
// or with the client's error (a timeout or cancellation changes nothing). The keys were validated by
// [New], so there is no input error. It blocks for one round trip, bounded by ctx. Safe for concurrent
// use, also while Run runs. With [WithHooks] it is the operation LEADER INSPECT; a rejection is
// returned unchanged with nothing read.
func (e *Election) Inspect(ctx context.Context) (Inspection, error) {
	ctx, sc, err := e.cfg.hooks.Begin(ctx, e.op(opInspect))
	if err != nil {
		return Inspection{}, err
	}
	in, err := e.inspect(ctx)
	sc.End(err)
	return in, err
}

func (e *Election) inspect(ctx context.Context) (Inspection, error) {
	var in lock.Inspection
	var err error
	if e.named {
		in, err = e.locker.Inspect(ctx, e.name)
	} else {
		in, err = e.locker.InspectKeys(ctx, e.leaseKey, e.fenceKey)
	}
	if err != nil {
		return Inspection{}, fmt.Errorf("leader: %w", err)
	}
	return Inspection{Exists: in.Exists, Remaining: in.Remaining, NoExpiry: in.NoExpiry, FencingToken: in.FencingToken}, nil
}
