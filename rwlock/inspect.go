package rwlock

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

// inspectScript runs read-only (EVALSHA_RO, EVAL_RO after a script flush): the server itself refuses
// a write from it.
var inspectScript = luakit.NewReadOnlyScript("inspect", luakit.MustLoad(scriptFS, "inspect").Source())

// ErrForeignData is luakit's shared value: [Locker.Inspect] found a key holding another Redis type or
// a sorted set with members this package never writes. Nothing was written.
var ErrForeignData = luakit.ErrForeignData

// Inspection is what [Locker.Inspect] reports about one key at one instant: a small value for operators
// and dashboards. It never carries an owner token. Its zero value (Exists false, Mode 0) describes an
// absent key: a free lock.
type Inspection struct {
	// Exists reports whether the key exists. It may exist with Mode 0 for a moment: expired entries
	// not pruned yet keep it (see Remaining).
	Exists bool
	// Mode is [Write] while an unexpired writer holds the key, [Read] while only readers do, and 0 when
	// nobody does.
	Mode Mode
	// Readers holds each unexpired reader's remaining life (server time, millisecond resolution),
	// shortest first; empty unless Mode is Read.
	Readers []time.Duration
	// Writer is the writer's remaining life; 0 unless Mode is Write.
	Writer time.Duration
	// Remaining is the key's own remaining life (PTTL), which follows its latest entry; 0 when the key
	// is absent. Expired entries not pruned yet can keep the key a little longer than its holders.
	Remaining time.Duration
}

// Inspect reads the holders of the lock at key (after the Locker's prefix) without changing it: one
// read-only script (EVALSHA_RO) reads the unexpired entries and the key's PTTL atomically. Unlike every other
// operation it does not prune expired entries: nothing is written and no expiry changes (PTTL before and
// after are equal). Owner tokens are never returned. The read counts as an access for the server's
// LRU/LFU eviction, as any read does.
//
// It fails before any I/O with an error matching [ErrInvalidConfig] for an empty key; with an error
// wrapping [ErrForeignData] when the key holds another Redis type or foreign members; or with the
// client's error (a timeout or cancellation changes nothing). It blocks for one round trip, bounded by
// ctx; the script is O(log N + M) for M unexpired holders. Safe for concurrent use.
func (l *Locker) Inspect(ctx context.Context, key string) (Inspection, error) {
	ctx, sc, err := l.cfg.own.Begin(ctx, "INSPECT")
	if err != nil {
		return Inspection{}, err
	}
	in, err := l.inspect(ctx, key)
	sc.End(err)
	return in, err
}

func (l *Locker) inspect(ctx context.Context, key string) (Inspection, error) {
	if err := luakit.ValidateKey("key", key); err != nil {
		return Inspection{}, fmt.Errorf("rwlock: %w", err)
	}
	arr, err := inspectScript.Exec(ctx, l.client, []string{l.cfg.keys.Key(key)}, nil).ToArray()
	if err != nil {
		return Inspection{}, fmt.Errorf("rwlock: inspect: %w", luakit.MarkForeign(err))
	}
	return decodeInspection(arr)
}

// decodeInspection decodes the reply of inspect.lua.
func decodeInspection(arr []rueidis.RedisMessage) (Inspection, error) {
	if len(arr) == 0 {
		return Inspection{}, fmt.Errorf("rwlock: inspect: empty reply")
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("rwlock: inspect: %w", err)
	}
	switch {
	case status == luakit.StatusAbsent:
		return Inspection{}, nil
	case status == luakit.StatusForeign:
		return Inspection{}, fmt.Errorf("rwlock: inspect: %w", ErrForeignData)
	case status != luakit.StatusOK || len(arr) < 3:
		return Inspection{}, fmt.Errorf("rwlock: inspect: unexpected reply (status %d, %d elements)", status, len(arr))
	}
	ms := make([]int64, len(arr)-1)
	for i := range ms {
		if ms[i], err = arr[i+1].AsInt64(); err != nil {
			return Inspection{}, fmt.Errorf("rwlock: inspect: element %d: %w", i+1, err)
		}
	}
	in := Inspection{Exists: true, Remaining: time.Duration(max(ms[0], 0)) * time.Millisecond}
	if ms[1] > 0 {
		in.Mode, in.Writer = Write, time.Duration(ms[1])*time.Millisecond
	}
	for _, r := range ms[2:] {
		in.Readers = append(in.Readers, time.Duration(r)*time.Millisecond)
	}
	if len(in.Readers) > 0 && in.Mode == 0 {
		in.Mode = Read
	}
	if len(in.Readers) > 0 && in.Mode == Write {
		return Inspection{}, fmt.Errorf("rwlock: inspect: %w (a writer and readers at once)", ErrForeignData)
	}
	return in, nil
}
