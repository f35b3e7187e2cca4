package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Inspection is what [Store.Inspect] reports about one key: a small value for operators and
// dashboards. It never holds the owner token, the fingerprint or the result bytes. Its zero value
// (Exists false) describes an absent key.
type Inspection struct {
	// Exists is false when the key holds no claim (never claimed, abandoned, or its lease or retention
	// ended); every other field is then zero.
	Exists bool
	// State is InProgress for a pending claim and Completed for a stored result.
	State State
	// Generation identifies the claim (see [Attempt.Generation]).
	Generation int64
	// TTL is the current state's configured lifetime, whole milliseconds: the lease last granted
	// (by TryBegin or the latest renewal) while pending, the retention once completed.
	TTL time.Duration
	// Remaining is the server's remaining life of the key (PTTL) when it was read: the rest of the
	// lease while pending (the key is freed after it unless renewed), the rest of the retention once
	// completed.
	Remaining time.Duration
	// ResultSize is the stored result's length in bytes (Completed only; 0 while pending).
	ResultSize int64
}

// Inspect reads key's claim without changing it: no field, no expiry (PTTL before and after are the
// same), no state is written, and no lease or retention is refreshed. It is meant for operators (find
// a stuck claim, see how long a result is kept); idemhttp.ClaimKey names the keys of HTTP requests.
// It reveals neither the owner token nor the fingerprint nor the result, so it cannot be used to
// complete or abandon a claim. The reading itself counts as an access for the server's LRU/LFU
// eviction, as any read does.
//
// Errors: an empty-key error before any I/O (matching luakit.ErrInvalidConfig); an error wrapping
// [ErrForeignData] when the key holds another Redis type or a hash this package did not write; or a
// server or connection error (a timeout is plain ctx.Err(): nothing can have changed). It blocks for
// one round trip (one script), bounded by ctx.
func (s *Store) Inspect(ctx context.Context, key string) (Inspection, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opInspect))
	if err != nil {
		return Inspection{}, err
	}
	in, err := s.inspect(ctx, key)
	sc.End(err)
	return in, err
}

func (s *Store) inspect(ctx context.Context, key string) (Inspection, error) {
	if err := validateKey(key); err != nil {
		return Inspection{}, err
	}
	arr, err := inspectScript.Exec(ctx, s.client, []string{s.cfg.keys.Key(key)}, nil).ToArray()
	if err != nil {
		return Inspection{}, fmt.Errorf("idempotency: inspect: %w", luakit.MarkForeign(err))
	}
	if len(arr) == 0 {
		return Inspection{}, errors.New("idempotency: inspect: empty reply")
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("idempotency: inspect: status: %w", err)
	}
	switch {
	case status == luakit.StatusAbsent:
		return Inspection{}, nil
	case status == luakit.StatusForeign:
		return Inspection{}, fmt.Errorf("idempotency: inspect: %w", ErrForeignData)
	case (status != luakit.StatusOK && status != luakit.StatusCompleted) || len(arr) != 5:
		return Inspection{}, fmt.Errorf("idempotency: inspect: unexpected reply (status %d, %d elements)", status, len(arr))
	}
	gen, err := luakit.Int64(arr[1])
	if err != nil || gen <= 0 {
		return Inspection{}, fmt.Errorf("idempotency: inspect: %w (generation is not a positive decimal)", ErrForeignData)
	}
	ttl, err := luakit.Int64(arr[2])
	if err != nil || ttl <= 0 {
		return Inspection{}, fmt.Errorf("idempotency: inspect: %w (TTL field is not a positive decimal)", ErrForeignData)
	}
	pttl, err := arr[3].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("idempotency: inspect: pttl: %w", err)
	}
	size, err := arr[4].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("idempotency: inspect: result size: %w", err)
	}
	in := Inspection{Exists: true, State: InProgress, Generation: gen, TTL: time.Duration(ttl) * time.Millisecond,
		Remaining: time.Duration(max(pttl, 0)) * time.Millisecond}
	if status == luakit.StatusCompleted {
		in.State, in.ResultSize = Completed, size
	}
	return in, nil
}
