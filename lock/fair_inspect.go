package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// fairInspectScript runs read-only (EVALSHA_RO), as the lock's inspection does.
var fairInspectScript = luakit.NewReadOnlyScript("fair_inspect", luakit.MustLoad(scriptFS, "fair_inspect").Source())

// MaxInspectedWaiters is the most queue entries [FairLocker.Inspect] lists; FairInspection.Queued counts
// them all.
const MaxInspectedWaiters = 100

// FairInspection is a fair lock's state as [FairLocker.Inspect] read it at one instant.
type FairInspection struct {
	// Inspection is the lease and the fence counter, as [Locker.Inspect] reports them.
	Inspection
	// Queued is the number of entries in the queue, live or not.
	Queued int
	// Waiters are the first entries of the queue, oldest first (at most [MaxInspectedWaiters]).
	Waiters []QueuedWaiter
}

// QueuedWaiter is one entry of a fair lock's queue. It carries no owner token.
type QueuedWaiter struct {
	// TTL is the lease TTL the waiter asked for (whole milliseconds).
	TTL time.Duration
	// Slice is the waiter's wait slice (see [WithWaitSlice]).
	Slice time.Duration
	// Live reports whether the waiter's key exists: a waiter that renewed its entry within its
	// slice. A release skips an entry that is not live.
	Live bool
	// Remaining is how long the entry stays live without another renewal (its key's PTTL); 0 when
	// not Live.
	Remaining time.Duration
}

// Inspect reads the fair lock named name without changing it: one read-only script (EVALSHA_RO) reads
// the lease and the fence counter as [Locker.Inspect] does, the queue's length and its first
// [MaxInspectedWaiters] entries with each waiter's key PTTL, atomically. It reveals no owner token.
//
// It fails before any I/O with an error matching [ErrInvalidConfig] for an invalid name; with an error
// wrapping [ErrForeignData] when a key holds another Redis type or the fence key a value the lock never
// writes; or with the client's error. It blocks for one round trip, bounded by ctx. Safe for
// concurrent use.
func (f *FairLocker) Inspect(ctx context.Context, name string) (FairInspection, error) {
	h, err := f.newLease(name, time.Millisecond)
	if err != nil {
		return FairInspection{}, err
	}
	keys := h.b.fair.keys
	return ownership.Do(ctx, &f.l.own, "INSPECT", func(ctx context.Context) (FairInspection, error) {
		arr, err := fairInspectScript.Exec(ctx, f.l.client, keys[:], []string{strconv.Itoa(MaxInspectedWaiters)}).ToArray()
		if err != nil {
			return FairInspection{}, fmt.Errorf("lock: inspect: %w", luakit.MarkForeign(err))
		}
		return decodeFairInspection(arr)
	})
}

// decodeFairInspection decodes fair_inspect.lua's reply {status, pttl, fence, queued, entries}.
func decodeFairInspection(arr []rueidis.RedisMessage) (FairInspection, error) {
	if len(arr) != 5 {
		return FairInspection{}, fmt.Errorf("lock: inspect: unexpected reply of %d elements", len(arr))
	}
	in, err := decodeInspection(arr[:3])
	if err != nil {
		return FairInspection{}, err
	}
	out := FairInspection{Inspection: in}
	queued, err := arr[3].AsInt64()
	if err != nil {
		return FairInspection{}, fmt.Errorf("lock: inspect: queued: %w", err)
	}
	out.Queued = int(queued)
	entries, err := arr[4].ToArray()
	if err != nil || len(entries)%3 != 0 {
		return FairInspection{}, fmt.Errorf("lock: inspect: unexpected queue entries (%d values): %w", len(entries), err)
	}
	for i := 0; i < len(entries); i += 3 {
		var v [3]int64
		for j := range v {
			if v[j], err = entries[i+j].AsInt64(); err != nil {
				return FairInspection{}, fmt.Errorf("lock: inspect: queue entry: %w", err)
			}
		}
		w := QueuedWaiter{TTL: time.Duration(v[0]) * time.Millisecond, Slice: time.Duration(v[1]) * time.Millisecond}
		if v[2] >= 0 {
			w.Live, w.Remaining = true, time.Duration(v[2])*time.Millisecond
		}
		out.Waiters = append(out.Waiters, w)
	}
	return out, nil
}
