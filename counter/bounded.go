package counter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Bounded is a buffered counter that can never take the global counter above its limit. Instead of
// buffering increments and sending them later, it reserves headroom: when its local headroom cannot
// cover an increment it takes a chunk ([WithChunk]) from the global counter with
// [Store.IncrementUpTo] (shrinking the chunk to what is left near the limit), so every value the
// server ever holds is at most the limit, and increments within the reserved headroom need no I/O.
// Flush and Close give the unused headroom back ([Store.DecrementDownTo] by the unused amount, floor
// 0). The global counter therefore counts increments plus headroom reserved and not yet used; after
// every Bounded of a key has been closed, exactly the increments that were allowed. Headroom reserved
// by a process that crashes stays counted: see the loss window in the package documentation,
// "Non-guarantees".
//
// A Bounded is safe for concurrent use; calls that reserve or give back headroom run one at a time,
// and a call waiting for another's round trip waits until its own ctx ends. It owns no goroutine.
type Bounded struct {
	store  *Store
	key    string
	limit  int64
	chunk  int64
	window time.Duration

	turn     chan struct{} // one slot: held by the call that uses or changes headroom
	headroom atomic.Int64  // reserved on the server, not yet used; written only while holding turn
	closed   atomic.Bool
}

// NewBounded returns a Bounded for the counter at key with the inclusive global limit (any int64; a
// limit below 1 refuses every increment). It does no I/O. It fails, with an error matching
// [ErrInvalidConfig], for a nil store, an empty key or an invalid option; nil options are ignored.
func NewBounded(store *Store, key string, limit int64, opts ...BoundedOption) (*Bounded, error) {
	if store == nil {
		return nil, luakit.InvalidConfig("counter", "nil store")
	}
	if _, err := store.key(key); err != nil {
		return nil, err
	}
	var cfg boundedConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.chunk == 0 {
		cfg.chunk = max(1, limit/100)
	}
	return &Bounded{store: store, key: key, limit: limit, chunk: cfg.chunk, window: cfg.window,
		turn: make(chan struct{}, 1)}, nil
}

// lock takes the turn for op, waiting until ctx ends (then it returns an error wrapping ctx.Err()).
// A free turn is taken even when ctx has ended, so calls that need no I/O do not depend on ctx.
func (b *Bounded) lock(ctx context.Context, op string) error {
	select {
	case b.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("counter: %s: waiting for a reservation in flight: %w", op, ctx.Err())
	}
}

func (b *Bounded) unlock() { <-b.turn }

// TryAdd counts delta (> 0) if the limit allows it: from local headroom when enough is reserved (no
// I/O), otherwise after reserving more (one round trip per attempt, bounded by ctx). It returns false,
// with nil error, when the global counter has too little headroom left for delta; the local headroom is
// then kept for smaller increments.
//
// Errors: [ErrInvalidDelta] for delta <= 0 (matching [ErrInvalidConfig]), [ErrClosed] after Close,
// an error wrapping ctx.Err() when ctx ends while another call's reservation runs, and the
// reservation's errors ([ErrDisconnected], [ErrUncertain], ...); on an error delta is not counted.
// An uncertain reservation may have taken headroom that this Bounded does not know of (it stays
// counted).
func (b *Bounded) TryAdd(ctx context.Context, delta int64) (bool, error) {
	if err := checkDelta(delta); err != nil {
		return false, err
	}
	if err := b.lock(ctx, "try add"); err != nil {
		return false, err
	}
	defer b.unlock()
	if b.closed.Load() {
		return false, errClosed
	}
	for b.headroom.Load() < delta {
		need := delta - b.headroom.Load()
		want := max(b.chunk, need)
		res, err := b.store.IncrementUpTo(ctx, b.key, want, b.limit, b.window)
		if err != nil {
			return false, err
		}
		if res.Allowed {
			b.headroom.Add(want)
			continue
		}
		left := headroomLeft(res.Value, b.limit)
		if left < need {
			return false, nil
		}
		// Shrink the reservation to what is left; another process may take it first, then the next
		// refusal reports less.
		res, err = b.store.IncrementUpTo(ctx, b.key, left, b.limit, b.window)
		if err != nil {
			return false, err
		}
		if res.Allowed {
			b.headroom.Add(left)
		}
	}
	b.headroom.Add(-delta)
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

// Headroom returns the reserved headroom not yet used. It does no I/O and never blocks.
func (b *Bounded) Headroom() int64 { return b.headroom.Load() }

// Flush gives the unused headroom back to the global counter (one round trip, none when there is
// none), bounded by ctx. On success the headroom is 0; on an error that certainly wrote nothing it is
// kept for a later Flush or Close; on [ErrUncertain] it is dropped (it may have been given back).
// It fails with [ErrClosed] after Close, and with an error wrapping ctx.Err() when ctx ends while
// another call's reservation runs.
func (b *Bounded) Flush(ctx context.Context) error {
	if err := b.lock(ctx, "flush"); err != nil {
		return err
	}
	defer b.unlock()
	if b.closed.Load() {
		return errClosed
	}
	return b.giveBack(ctx)
}

func (b *Bounded) giveBack(ctx context.Context) error {
	h := b.headroom.Load()
	if h == 0 {
		return nil
	}
	_, err := b.store.DecrementDownTo(ctx, b.key, h, 0)
	if err == nil || errors.Is(err, ErrUncertain) {
		b.headroom.Store(0)
	}
	return err
}

// Close makes later TryAdd and Flush calls fail with [ErrClosed] and gives the unused headroom back
// (as Flush), waiting first for a reservation in flight until ctx ends (then it returns an error
// wrapping ctx.Err() and the headroom stays reserved). It returns the give-back's error. Close is
// idempotent: a later Close gives back what an earlier one could not (a certain failure keeps the
// headroom) and returns nil once there is none.
func (b *Bounded) Close(ctx context.Context) error {
	b.closed.Store(true)
	if err := b.lock(ctx, "close"); err != nil {
		return err
	}
	defer b.unlock()
	return b.giveBack(ctx)
}
