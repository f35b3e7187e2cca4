package contenders

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis/rueidislock"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// Release releases a lock that Hold or Wait took.
type Release func(ctx context.Context) error

// Handoff is one lock implementation as two instances on separate clients: a holder and a waiter.
// The hand-off runs Hold, then Wait in another goroutine, then the holder's Release: the time from
// that Release to Wait returning is the hand-off latency.
type Handoff interface {
	// Name is the contender's row name.
	Name() string
	// Hold takes key on the holder instance without waiting (with TTL).
	Hold(ctx context.Context, key string) (Release, error)
	// Wait takes key on the waiter instance, waiting as the library waits for a held lock.
	Wait(ctx context.Context, key string) (Release, error)
	// Close releases both instances' clients.
	Close()
}

// HandoffSpec is a row of the hand-off contender table (its ceiling row is the floor: no waiting at
// all, two round trips; New builds the holder and the waiter, each over its own clients).
type HandoffSpec = Spec[Handoff]

// Handoffs is the hand-off contender table.
var Handoffs = []HandoffSpec{
	{Name: Coordkit, New: NewCoordkitHandoff},
	{Name: Rueidislock, New: NewRueidislockHandoff},
	{Name: BsmRedislock, New: NewBsmHandoff},
	{Name: Redsync, New: NewRedsyncHandoff},
	{Name: CoordkitFair, New: NewFairHandoff},
	{Name: SketchGrant, New: NewSketchGrantHandoff},
	{Name: SketchBlock, New: NewSketchBlockHandoff},
	{Name: RawRueidis, Ceiling: true, New: NewRawHandoff},
}

// HandoffNames returns the names of Handoffs, in table order.
func HandoffNames() []string { return Names(Handoffs) }

type coordkitHandoff struct {
	holder, waiter *lock.Locker
	closers
}

// NewCoordkitHandoff returns Coordkit's hand-off: the holder's Locker over a cache-free client, the
// waiter's Locker (no option) over a luakit.NewTrackedClient client, so that a waiting Acquire wakes
// on the lease key's invalidation.
func NewCoordkitHandoff(s Server) (Handoff, error) {
	hc, err := s.newClient()
	if err != nil {
		return nil, err
	}
	h := &coordkitHandoff{closers: closers{hc.Close}}
	wc, err := luakit.NewTrackedClient(s.Option, luakit.NewTracker())
	if err != nil {
		h.Close()
		return nil, err
	}
	h.closers = append(h.closers, wc.Close)
	if h.holder, err = lock.New(hc); err != nil {
		h.Close()
		return nil, err
	}
	if h.waiter, err = lock.New(wc); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (*coordkitHandoff) Name() string { return Coordkit }

func (h *coordkitHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return coordkitLease(h.holder.TryAcquire(ctx, key, TTL))
}

func (h *coordkitHandoff) Wait(ctx context.Context, key string) (Release, error) {
	return coordkitLease(h.waiter.Acquire(ctx, key, TTL))
}

func coordkitLease(l *lock.Lease, err error) (Release, error) {
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return coordkitRelease(ctx, l) }, nil
}

type rueidislockHandoff struct{ holder, waiter rueidislock.Locker }

// NewRueidislockHandoff returns rueidislock's hand-off: two Lockers (two clients, invalidations on),
// the holder's TryWithContext and the waiter's WithContext.
func NewRueidislockHandoff(s Server) (Handoff, error) {
	holder, err := rueidislock.NewLocker(rueidislockOption(s))
	if err != nil {
		return nil, err
	}
	waiter, err := rueidislock.NewLocker(rueidislockOption(s))
	if err != nil {
		holder.Close()
		return nil, err
	}
	return &rueidislockHandoff{holder, waiter}, nil
}

func (*rueidislockHandoff) Name() string { return Rueidislock }

func (r *rueidislockHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return rueidislockRelease(r.holder.TryWithContext(ctx, key))
}

func (r *rueidislockHandoff) Wait(ctx context.Context, key string) (Release, error) {
	return rueidislockRelease(r.waiter.WithContext(ctx, key))
}

func rueidislockRelease(_ context.Context, cancel context.CancelFunc, err error) (Release, error) {
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (r *rueidislockHandoff) Close() {
	r.waiter.Close()
	r.holder.Close()
}

// BsmRetry is the bsm/redislock waiter's retry strategy in the hand-off: a 1 ms linear backoff.
const BsmRetry = time.Millisecond

type bsmHandoff struct {
	holder, waiter *redislock.Client
	closers
}

// NewBsmHandoff returns bsm/redislock's hand-off: two go-redis clients; the holder's Obtain makes no
// retry, the waiter's retries with a BsmRetry linear backoff (the library has no notification).
func NewBsmHandoff(s Server) (Handoff, error) {
	h, w := redis.NewClient(s.GoRedis()), redis.NewClient(s.GoRedis())
	return &bsmHandoff{holder: redislock.New(h), waiter: redislock.New(w),
		closers: closers{func() { _ = h.Close() }, func() { _ = w.Close() }}}, nil
}

func (*bsmHandoff) Name() string { return BsmRedislock }

func (b *bsmHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return bsmRelease(b.holder.Obtain(ctx, key, TTL, nil))
}

func (b *bsmHandoff) Wait(ctx context.Context, key string) (Release, error) {
	return bsmRelease(b.waiter.Obtain(ctx, key, TTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(BsmRetry)}))
}

func bsmRelease(l *redislock.Lock, err error) (Release, error) {
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

type redsyncHandoff struct {
	holder, waiter *redsync.Redsync
	closers
}

// NewRedsyncHandoff returns redsync's hand-off: two go-redis pools; the holder's TryLockContext and
// the waiter's LockContext with redsync's defaults (32 tries, a random 50-250 ms delay between them).
func NewRedsyncHandoff(s Server) (Handoff, error) {
	h, w := redis.NewClient(s.GoRedis()), redis.NewClient(s.GoRedis())
	return &redsyncHandoff{holder: redsync.New(redsyncgoredis.NewPool(h)), waiter: redsync.New(redsyncgoredis.NewPool(w)),
		closers: closers{func() { _ = h.Close() }, func() { _ = w.Close() }}}, nil
}

func (*redsyncHandoff) Name() string { return Redsync }

func (r *redsyncHandoff) Hold(ctx context.Context, key string) (Release, error) {
	m := r.holder.NewMutex(key, redsync.WithExpiry(TTL))
	return redsyncRelease(m, m.TryLockContext(ctx))
}

func (r *redsyncHandoff) Wait(ctx context.Context, key string) (Release, error) {
	m := r.waiter.NewMutex(key, redsync.WithExpiry(TTL))
	return redsyncRelease(m, m.LockContext(ctx))
}

func redsyncRelease(m *redsync.Mutex, err error) (Release, error) {
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

// rawHandoff is the floor: the waiter does not wait on the server at all; it is told in-process the
// moment the holder's release has returned, then acquires. Release to acquired is two round trips.
type rawHandoff struct {
	holder, waiter *rawLock
	mu             sync.Mutex
	released       map[string]chan struct{}
}

// NewRawHandoff returns the raw hand-off floor: the raw ceiling's scripts on two clients, the waiter
// woken by an in-process signal right after the holder's release returns.
func NewRawHandoff(s Server) (Handoff, error) {
	h, err := NewRawLock(s)
	if err != nil {
		return nil, err
	}
	w, err := NewRawLock(s)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &rawHandoff{holder: h.(*rawLock), waiter: w.(*rawLock), released: map[string]chan struct{}{}}, nil
}

func (*rawHandoff) Name() string { return RawRueidis }

func (r *rawHandoff) signal(key string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.released[key]
	if !ok {
		ch = make(chan struct{})
		r.released[key] = ch
	}
	return ch
}

func (r *rawHandoff) Hold(ctx context.Context, key string) (Release, error) {
	owner := nextOwner()
	if err := r.holder.acquire(ctx, key, owner); err != nil {
		return nil, err
	}
	ch := r.signal(key)
	return func(ctx context.Context) error {
		err := r.holder.release(ctx, key, owner)
		close(ch)
		return err
	}, nil
}

func (r *rawHandoff) Wait(ctx context.Context, key string) (Release, error) {
	ch := r.signal(key)
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	delete(r.released, key)
	r.mu.Unlock()
	owner := nextOwner()
	if err := r.waiter.acquire(ctx, key, owner); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return r.waiter.release(ctx, key, owner) }, nil
}

func (r *rawHandoff) Close() {
	r.waiter.Close()
	r.holder.Close()
}
