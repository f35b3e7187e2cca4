package counter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// BoundedOptions configures [NewBounded]. The zero value uses every default.
type BoundedOptions struct {
	// Chunk is how much headroom one reservation takes from the global counter. Larger chunks mean
	// fewer round trips and more headroom held (unused) by this process. Default (0): max(1, limit/100).
	// Near the limit a reservation shrinks to what is left.
	Chunk int64
	// TTL is passed to [Store.IncrementIfLessThan] on every reservation: when positive, a counter
	// created by a reservation expires after TTL (a fixed window). 0 (default): no expiry.
	TTL time.Duration
}

// Bounded is a buffered counter that can never take the global counter above its limit. Instead of
// buffering increments and sending them later, it reserves headroom: when its local headroom cannot
// cover an increment it takes a chunk from the global counter with [Store.IncrementIfLessThan]
// (shrinking the chunk to what is left near the limit), so every value the server ever holds is
// at most the limit, and increments within the reserved headroom need no I/O. Flush and Close give
// the unused headroom back ([Store.DecrementIfGreaterThan] by the unused amount, minimum 0).
//
// The global counter therefore counts increments plus headroom reserved and not yet used. After every
// Bounded of a key has been closed, it counts exactly the increments that were allowed.
//
// Loss window: headroom reserved by a process that crashes stays counted (it is never given back),
// lowering the number of increments the limit still allows; use TTL windows to bound the damage.
// If the counter expires or is deleted while headroom is held, giving it back is skipped when the
// value is below the unused amount (the reservation died with the key).
//
// A Bounded is safe for concurrent use; reservations are serialised (one round trip at a time per
// Bounded). It owns no goroutine.
type Bounded struct {
	store *Store
	key   string
	limit int64
	chunk int64
	ttl   time.Duration

	mu       sync.Mutex
	headroom int64 // reserved on the server, not yet used
	closed   bool
}

// NewBounded returns a Bounded for the counter at key with the inclusive global limit. It does no
// I/O. It fails for an empty key, a negative Chunk or an invalid TTL.
func NewBounded(store *Store, key string, limit int64, opts BoundedOptions) (*Bounded, error) {
	if store == nil {
		return nil, errors.New("counter: nil store")
	}
	if _, err := store.key(key); err != nil {
		return nil, err
	}
	if opts.Chunk < 0 {
		return nil, fmt.Errorf("%w: chunk %d", ErrInvalidDelta, opts.Chunk)
	}
	if _, err := ttlMillis(opts.TTL); err != nil {
		return nil, err
	}
	chunk := opts.Chunk
	if chunk == 0 {
		chunk = max(1, limit/100)
	}
	return &Bounded{store: store, key: key, limit: limit, chunk: chunk, ttl: opts.TTL}, nil
}

// TryAdd counts delta (> 0) if the limit allows it: from local headroom when enough is reserved (no
// I/O), otherwise after reserving more (one round trip per attempt, bounded by ctx). It returns false,
// with nil error, when the global counter has too little headroom left for delta; the local headroom is
// then kept for smaller increments.
//
// Errors: [ErrInvalidDelta] for delta <= 0, [ErrClosed] after Close, and the reservation's errors
// ([ErrDisconnected], [ErrUncertain], ...); on an error delta is not counted. An uncertain
// reservation may have taken headroom that this Bounded does not know of (it stays counted).
func (b *Bounded) TryAdd(ctx context.Context, delta int64) (bool, error) {
	if delta <= 0 {
		return false, fmt.Errorf("%w: got %d", ErrInvalidDelta, delta)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, ErrClosed
	}
	for b.headroom < delta {
		need := delta - b.headroom
		want := max(b.chunk, need)
		res, err := b.store.IncrementIfLessThan(ctx, b.key, want, b.limit, b.ttl)
		if err != nil {
			return false, err
		}
		if res.Allowed {
			b.headroom += want
			continue
		}
		left := headroomLeft(res.Value, b.limit)
		if left < need {
			return false, nil
		}
		// Shrink the reservation to what is left; another process may take it first, then the next
		// refusal reports less.
		res, err = b.store.IncrementIfLessThan(ctx, b.key, left, b.limit, b.ttl)
		if err != nil {
			return false, err
		}
		if res.Allowed {
			b.headroom += left
		}
	}
	b.headroom -= delta
	return true, nil
}

// headroomLeft returns limit - value, 0 when value >= limit, saturating at MaxInt64.
func headroomLeft(value, limit int64) int64 {
	if value >= limit {
		return 0
	}
	if value < 0 && limit > math.MaxInt64+value {
		return math.MaxInt64
	}
	return limit - value
}

// Headroom returns the reserved headroom not yet used.
func (b *Bounded) Headroom() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.headroom
}

// Flush gives the unused headroom back to the global counter (one round trip, none when there is
// none), bounded by ctx. On success the headroom is 0; on an error that certainly wrote nothing it is
// kept for a later Flush; on [ErrUncertain] it is dropped (it may have been given back).
func (b *Bounded) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked(ctx)
}

func (b *Bounded) flushLocked(ctx context.Context) error {
	if b.headroom == 0 {
		return nil
	}
	_, err := b.store.DecrementIfGreaterThan(ctx, b.key, b.headroom, 0)
	if err == nil || errors.Is(err, ErrUncertain) {
		b.headroom = 0
	}
	return err
}

// Close gives the unused headroom back (as Flush) and makes later TryAdds fail with [ErrClosed].
// It returns Flush's error; a second Close retries the give-back.
func (b *Bounded) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.flushLocked(ctx)
}
