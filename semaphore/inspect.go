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

// ErrForeignData is luakit's shared value: [Inspect] found a key holding another Redis type, or a
// sorted set without the stored capacity. Nothing was written.
var ErrForeignData = luakit.ErrForeignData

// Inspection is what [Inspect] reports about one semaphore key at one instant: a small value for
// operators and dashboards. It never carries an owner token. Its zero value (Found false) describes an
// absent key: no permit is held and no capacity is stored (the next acquisition sets it).
type Inspection struct {
	// Found reports whether the key exists; every other field is zero when it does not.
	Found bool
	// Capacity is the capacity stored by the acquisitions (1 .. 2^53).
	Capacity int64
	// Permits holds each unexpired permit's remaining life (server time, millisecond resolution),
	// shortest first; a permit without expiry is [Forever] and listed last.
	Permits []time.Duration
	// Free is Capacity minus the unexpired permits, never below 0 (more permits than the capacity can
	// exist after a failover; see # Capacity in the package documentation).
	Free int64
	// Remaining is the key's own remaining life (PTTL), which follows its latest permit; [Forever]
	// while a permit has no expiry.
	Remaining time.Duration
}

// Inspect reads the semaphore at key without changing it: one read-only script (EVALSHA_RO) reads the stored
// capacity, the unexpired permits and the key's PTTL atomically. Unlike every acquisition it does not
// prune expired permits: nothing is written and no expiry changes (PTTL before and after are equal).
// Owner tokens are never returned. It needs no capacity (it reports the stored one), so it is a
// function rather than a method; of opts only [WithKeyPrefix], [WithHooks] and [WithInstance] matter
// (others are validated and ignored): with hooks it is the operation SEMAPHORE INSPECT, admitted after
// the input checks and before the read. The read counts as an access for the server's LRU/LFU eviction, as any read does.
//
// It fails before any I/O with an error wrapping [ErrNilClient] for a nil client and one matching
// [ErrInvalidConfig] for an empty key or an invalid option; with an error wrapping [ErrForeignData]
// when the key holds another Redis type or a sorted set this package did not write; or with the
// client's error (a timeout or cancellation changes nothing). It blocks for one round trip, bounded by
// ctx; the script is O(log N + M) for M unexpired permits. Safe for concurrent use.
func Inspect(ctx context.Context, client rueidis.Client, key string, opts ...Option) (Inspection, error) {
	if client == nil {
		return Inspection{}, fmt.Errorf("semaphore: %w", ErrNilClient)
	}
	if err := luakit.ValidateKey("semaphore key", key); err != nil {
		return Inspection{}, fmt.Errorf("semaphore: %w", err)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return Inspection{}, err
		}
	}
	return ownership.Do(ctx, &cfg.own, "INSPECT", func(ctx context.Context) (Inspection, error) {
		arr, err := inspectScript.Exec(ctx, client, []string{cfg.keys.Key(key)}, nil).ToArray()
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
	case status == 0:
		return Inspection{}, nil
	case status == -1:
		return Inspection{}, fmt.Errorf("semaphore: inspect: %w", ErrForeignData)
	case status != 1 || len(arr) < 3:
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
	in := Inspection{Found: true, Capacity: capacity, Remaining: Forever}
	if pttl >= 0 {
		in.Remaining = time.Duration(pttl) * time.Millisecond
	}
	for i, m := range arr[3:] {
		ms, err := m.AsInt64()
		if err != nil {
			return Inspection{}, fmt.Errorf("semaphore: inspect: permit %d: %w", i, err)
		}
		d := Forever
		if ms >= 0 {
			d = time.Duration(ms) * time.Millisecond
		}
		in.Permits = append(in.Permits, d)
	}
	in.Free = max(capacity-int64(len(in.Permits)), 0)
	return in, nil
}
