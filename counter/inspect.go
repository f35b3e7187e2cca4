package counter

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// inspectScript runs read-only (EVALSHA_RO, EVAL_RO after a script flush): the server itself refuses
// a write from it.
var inspectScript = luakit.NewReadOnlyScript("inspect", luakit.MustLoad(scriptFS, "inspect").Source())

// Inspection is what [Store.Inspect] reports about one counter at one instant. Its zero value (Exists
// false) describes an absent key, which every increment treats as 0.
type Inspection struct {
	// Exists reports whether the key exists.
	Exists bool
	// Value is the counter's value; 0 when the key is absent.
	Value int64
	// Remaining is the key's remaining life on the server (PTTL, millisecond resolution) when it was
	// read; 0 for a key without expiry or an absent key (see NoExpiry and Exists to tell them apart).
	Remaining time.Duration
	// NoExpiry is true for an existing key without expiry (it lives until deleted).
	NoExpiry bool
}

// Inspect reads the counter at key and its remaining life, atomically, without changing either: one
// read-only script (EVALSHA_RO: TYPE, GET, PTTL), so PTTL before and after are equal. Unlike [Store.Get] it reports
// the expiry and whether the key exists. The read counts as an access for the server's LRU/LFU
// eviction, as any read does.
//
// Errors: an empty key before any I/O (matching [ErrInvalidConfig]); [ErrNotInteger] (matching
// [ErrForeignData]) when the key holds another type or a string that is not a decimal int64; [ErrClosed]
// after Close; otherwise the client's error (a timeout or cancellation changes nothing). Unlike the
// increments it is sent even while the Store considers the server unreachable, so an operator sees the
// connection error itself. It blocks for one round trip, bounded by ctx. Safe for concurrent use.
func (s *Store) Inspect(ctx context.Context, key string) (Inspection, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER INSPECT", Instance: s.cfg.instance})
	if err != nil {
		return Inspection{}, err
	}
	in, err := s.inspect(ctx, key)
	sc.End(err)
	return in, err
}

func (s *Store) inspect(ctx context.Context, key string) (Inspection, error) {
	k, err := s.key(key)
	if err != nil {
		return Inspection{}, err
	}
	if s.closed.Load() {
		return Inspection{}, ErrClosed
	}
	arr, err := inspectScript.Exec(ctx, s.client, []string{k}, nil).ToArray()
	if err != nil {
		return Inspection{}, fmt.Errorf("counter: inspect: %w", luakit.Permission(err))
	}
	if len(arr) == 0 {
		return Inspection{}, fmt.Errorf("counter: inspect: empty reply")
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("counter: inspect: %w", err)
	}
	switch {
	case status == luakit.StatusAbsent:
		return Inspection{}, nil
	case status == luakit.StatusForeign:
		return Inspection{}, ErrNotInteger
	case status != luakit.StatusOK || len(arr) != 3:
		return Inspection{}, fmt.Errorf("counter: inspect: unexpected reply (status %d, %d elements)", status, len(arr))
	}
	v, err := luakit.Int64(arr[1])
	if err != nil {
		return Inspection{}, ErrNotInteger // the detail would quote the value
	}
	pttl, err := arr[2].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("counter: inspect: pttl: %w", err)
	}
	in := Inspection{Exists: true, Value: v, NoExpiry: pttl < 0}
	if pttl >= 0 {
		in.Remaining = time.Duration(pttl) * time.Millisecond
	}
	return in, nil
}
