package semaphore

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/redis/rueidis"
)

// inspectScript runs read-only (EVALSHA_RO, EVAL_RO after a script flush): the server itself refuses
// a write from it.
var inspectScript = luakit.NewReadOnlyScript("inspect", luakit.MustLoad(scriptFS, "inspect").Source())

// ErrForeignData is luakit's shared value: [Semaphore.Inspect] found a key holding another Redis type,
// or a sorted set without the stored capacity. Nothing was written.
var ErrForeignData = luakit.ErrForeignData

// Inspection is what [Semaphore.Inspect] reports about one semaphore key at one instant: a small value
// for operators and dashboards. It never carries an owner token. Its zero value (Exists false)
// describes an absent key: no permit is held and no capacity is stored (the next acquisition sets it).
type Inspection struct {
	// Exists reports whether the key exists; every other field is zero when it does not.
	Exists bool
	// Capacity is the capacity stored by the acquisitions (1 .. 2^53), which may differ from the
	// Semaphore's own while permits of another capacity are active.
	Capacity int64
	// Permits holds the unexpired permits, shortest remaining life first; those without expiry last.
	Permits []PermitInspection
	// Free is Capacity minus the unexpired permits, never below 0 (more permits than the capacity can
	// exist after a failover; see # Capacity in the package documentation).
	Free int64
	// Remaining is the key's own remaining life (PTTL, millisecond resolution), which follows its
	// latest permit; 0 when NoExpiry.
	Remaining time.Duration
	// NoExpiry is true while a permit without expiry keeps the key without expiry.
	NoExpiry bool
}

// PermitInspection is one unexpired permit in an [Inspection] (never its owner token).
type PermitInspection struct {
	// Remaining is the permit's remaining life on the server clock (millisecond resolution); 0 when
	// NoExpiry.
	Remaining time.Duration
	// NoExpiry is true for a permit taken by [Semaphore.TryAcquireNoExpiry] or
	// [Semaphore.AcquireNoExpiry] (or moved there by [Permit.ExtendNoExpiry]): it lasts until released.
	NoExpiry bool
}

// Inspect reads the semaphore's key without changing it: one read-only script (EVALSHA_RO) reads the
// stored capacity, the unexpired permits and the key's PTTL atomically. Unlike every acquisition it does
// not prune expired permits: nothing is written and no expiry changes (PTTL before and after are equal).
// Owner tokens are never returned. It reports the stored capacity, so an operator's Semaphore may be
// made with any capacity. The read counts as an access for the server's LRU/LFU eviction.
//
// It fails with an error wrapping [ErrForeignData] when the key holds another Redis type or a sorted
// set this package did not write, or with the client's error (a timeout or cancellation changes
// nothing). It works after [Semaphore.Close]. It blocks for one round trip, bounded by ctx; the script
// is O(log N + M) for M unexpired permits. Safe for concurrent use. With [WithHooks] it is the
// operation SEMAPHORE INSPECT; a rejection is returned unchanged with nothing read.
func (s *Semaphore) Inspect(ctx context.Context) (Inspection, error) {
	return ownership.Do(ctx, &s.cfg.own, "INSPECT", func(ctx context.Context) (Inspection, error) {
		arr, err := inspectScript.Exec(ctx, s.client, s.keys, nil).ToArray()
		if err != nil {
			return Inspection{}, fmt.Errorf("semaphore: inspect: %w", luakit.MarkForeign(err))
		}
		return decodeInspection(arr)
	})
}

// decodeInspection decodes the reply of inspect.lua.
func decodeInspection(arr []rueidis.RedisMessage) (Inspection, error) {
	if len(arr) == 0 {
		return Inspection{}, fmt.Errorf("semaphore: inspect: empty reply")
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("semaphore: inspect: %w", err)
	}
	switch {
	case status == luakit.StatusAbsent:
		return Inspection{}, nil
	case status == luakit.StatusForeign:
		return Inspection{}, fmt.Errorf("semaphore: inspect: %w", ErrForeignData)
	case status != luakit.StatusOK || len(arr) < 3:
		return Inspection{}, fmt.Errorf("semaphore: inspect: unexpected reply (status %d, %d elements)", status, len(arr))
	}
	capacity, err := luakit.Int64(arr[1])
	if err != nil || capacity < 1 || capacity > maxCapacity {
		return Inspection{}, fmt.Errorf("semaphore: inspect: %w (the stored capacity is not in [1, 2^53])", ErrForeignData)
	}
	pttl, err := arr[2].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("semaphore: inspect: pttl: %w", err)
	}
	in := Inspection{Exists: true, Capacity: capacity, NoExpiry: pttl < 0}
	if pttl >= 0 {
		in.Remaining = time.Duration(pttl) * time.Millisecond
	}
	for i, m := range arr[3:] {
		ms, err := m.AsInt64()
		if err != nil {
			return Inspection{}, fmt.Errorf("semaphore: inspect: permit %d: %w", i, err)
		}
		p := PermitInspection{NoExpiry: ms < 0}
		if ms >= 0 {
			p.Remaining = time.Duration(ms) * time.Millisecond
		}
		in.Permits = append(in.Permits, p)
	}
	in.Free = max(capacity-int64(len(in.Permits)), 0)
	return in, nil
}
