package contenders

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/coordkit/coordkit/lock"
)

// Lock is one lock implementation: it takes and releases a lock named key once, without waiting.
// key is distinct per call; an implementation derives the keys it needs from it (Coordkit and the
// raw ceiling as lock.Keys does: {key}:lease, {key}:fence). A Lock is safe for concurrent use.
type Lock interface {
	// Name is the contender's row name.
	Name() string
	// TryAcquireRelease makes one non-waiting acquisition of key with TTL and releases it; not
	// acquiring is an error (keys are fresh, so it never happens in a correct run).
	TryAcquireRelease(ctx context.Context, key string) error
	// Close releases the contender's clients.
	Close()
}

// LockSpec is a row of the lock contender table.
type LockSpec = Spec[Lock]

// Row names of the lock contenders.
const (
	Coordkit     = "coordkit"
	Rueidislock  = "rueidislock"
	BsmRedislock = "bsm-redislock"
	Redsync      = "redsync"
	RawRueidis   = "raw-rueidis"
)

// Locks is the lock contender table: Coordkit, its peers and the raw two-script ceiling.
var Locks = []LockSpec{
	{Name: Coordkit, New: NewCoordkitLock},
	{Name: CoordkitFair, New: NewCoordkitFairLock},
	{Name: Rueidislock, New: NewRueidislock},
	{Name: BsmRedislock, New: NewBsmRedislock},
	{Name: Redsync, New: NewRedsync},
	{Name: RawRueidis, Ceiling: true, New: NewRawLock},
}

// Row names of the conditional section (cmd/peers -only conditional): Coordkit's lock with the
// scripts only and with its defaults, for the plain cycle and for a cycle with one Extend.
const (
	CoordkitScripts       = "coordkit-scripts"
	CoordkitExtendScripts = "coordkit-extend-scripts"
	CoordkitExtend        = "coordkit-extend"
)

// CoordkitConditional is the conditional section's table: lock.WithConditionalCommands(false) (every
// Extend and Release a script) against the defaults (SET IFEQ PX and DELIFEQ / DELEX IFEQ where the
// server has them), for TryAcquire + Release and for TryAcquire + Extend + Release.
var CoordkitConditional = []LockSpec{
	{Name: CoordkitScripts, New: coordkitVariant(CoordkitScripts, false, false)},
	{Name: Coordkit, New: NewCoordkitLock},
	{Name: CoordkitExtendScripts, New: coordkitVariant(CoordkitExtendScripts, false, true)},
	{Name: CoordkitExtend, New: coordkitVariant(CoordkitExtend, true, true)},
}

// coordkitVariant builds Coordkit's lock named name with lock.WithConditionalCommands(conditional),
// whose cycle extends the lease once before releasing it when extend is set.
func coordkitVariant(name string, conditional, extend bool) func(s Server) (Lock, error) {
	return func(s Server) (Lock, error) {
		c, err := s.newClient()
		if err != nil {
			return nil, err
		}
		lk, err := lock.New(c, lock.WithConditionalCommands(conditional))
		if err != nil {
			c.Close()
			return nil, err
		}
		return &coordkitLock{lk: lk, name: name, extend: extend, closers: closers{c.Close}}, nil
	}
}

// LockNames returns the names of Locks, in table order.
func LockNames() []string { return Names(Locks) }

// coordkitLock: lock.Locker TryAcquire + Lease.Release over one cache-free client.
type coordkitLock struct {
	lk     *lock.Locker
	name   string // "": Coordkit
	extend bool   // the cycle extends the lease once before releasing it
	closers
}

// NewCoordkitLock returns Coordkit's lock: lock.New over a cache-free client, TryAcquire then
// Lease.Release.
func NewCoordkitLock(s Server) (Lock, error) {
	c, err := s.newClient()
	if err != nil {
		return nil, err
	}
	lk, err := lock.New(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &coordkitLock{lk: lk, closers: closers{c.Close}}, nil
}

func (c *coordkitLock) Name() string {
	if c.name != "" {
		return c.name
	}
	return Coordkit
}

func (c *coordkitLock) TryAcquireRelease(ctx context.Context, key string) error {
	lease, err := c.lk.TryAcquire(ctx, key, TTL) // {key}:lease, {key}:fence
	if err != nil {
		return err
	}
	if c.extend {
		if ok, err := lease.Extend(ctx); err != nil || !ok {
			_, _ = lease.Release(ctx)
			return fmt.Errorf("coordkit extend: %v, %w", ok, err)
		}
	}
	return coordkitRelease(ctx, lease)
}

func coordkitRelease(ctx context.Context, lease *lock.Lease) error {
	out, err := lease.Release(ctx)
	if err != nil {
		return err
	}
	if out != lock.Released {
		return fmt.Errorf("coordkit release: %v", out)
	}
	return nil
}

// rueidislockLock: rueidislock with one key per lock (KeyMajority 1), its defaults otherwise
// (client-side-caching invalidations on, as the library sets them up).
type rueidislockLock struct{ l rueidislock.Locker }

// rueidislockOption returns the rueidislock option of every rueidislock row: one key per lock
// (KeyMajority 1, like the other single-server locks here), KeyValidity TTL, TryNextAfter
// RueidislockTryNextAfter, defaults otherwise.
func rueidislockOption(s Server) rueidislock.LockerOption {
	return rueidislock.LockerOption{ClientOption: s.Option, KeyMajority: 1, KeyValidity: TTL, TryNextAfter: RueidislockTryNextAfter}
}

// RueidislockTryNextAfter is rueidislock's TryNextAfter in every row: the deadline of each
// acquisition call. Its 20 ms default fails calls that queue longer on a loaded machine (context
// deadline exceeded at 8 callers on 2 shared cores); with one key there is no next key to try.
const RueidislockTryNextAfter = time.Second

// NewRueidislock returns rueidislock (github.com/redis/rueidis/rueidislock): TryWithContext, then
// its cancel function (which deletes the key and returns once it is deleted).
func NewRueidislock(s Server) (Lock, error) {
	l, err := rueidislock.NewLocker(rueidislockOption(s))
	if err != nil {
		return nil, err
	}
	return &rueidislockLock{l}, nil
}

func (*rueidislockLock) Name() string { return Rueidislock }

func (r *rueidislockLock) TryAcquireRelease(ctx context.Context, key string) error {
	_, cancel, err := r.l.TryWithContext(ctx, key)
	if err != nil {
		return err
	}
	cancel()
	return nil
}

func (r *rueidislockLock) Close() { r.l.Close() }

// bsmLock: bsm/redislock Obtain (no retry) + Release over a go-redis client (default pool).
type bsmLock struct {
	c *redislock.Client
	closers
}

// NewBsmRedislock returns github.com/bsm/redislock over a go-redis v9 client with its default pool:
// Obtain with no retry, then Release.
func NewBsmRedislock(s Server) (Lock, error) {
	rdb := redis.NewClient(s.GoRedis())
	return &bsmLock{c: redislock.New(rdb), closers: closers{func() { _ = rdb.Close() }}}, nil
}

func (*bsmLock) Name() string { return BsmRedislock }

func (b *bsmLock) TryAcquireRelease(ctx context.Context, key string) error {
	l, err := b.c.Obtain(ctx, key, TTL, nil)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// redsyncLock: go-redsync/redsync with one pool (a go-redis v9 client): TryLockContext + UnlockContext.
type redsyncLock struct {
	rs *redsync.Redsync
	closers
}

// NewRedsync returns github.com/go-redsync/redsync/v4 over one go-redis v9 pool (its goredis/v9
// adapter, default pool): a mutex per call with expiry TTL, TryLockContext, then UnlockContext.
func NewRedsync(s Server) (Lock, error) {
	rdb := redis.NewClient(s.GoRedis())
	return &redsyncLock{rs: redsync.New(redsyncgoredis.NewPool(rdb)), closers: closers{func() { _ = rdb.Close() }}}, nil
}

func (*redsyncLock) Name() string { return Redsync }

func (r *redsyncLock) TryAcquireRelease(ctx context.Context, key string) error {
	m := r.rs.NewMutex(key, redsync.WithExpiry(TTL))
	if err := m.TryLockContext(ctx); err != nil {
		return err
	}
	ok, err := m.UnlockContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("redsync: unlock failed")
	}
	return nil
}

// The raw ceiling: the least a fenced lock can do, as two EVALSHA round trips.
var (
	rawAcquire = rueidis.NewLuaScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	rawRelease = rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// ErrRawNotAcquired is the raw ceiling's "the key was held" (SET NX did not set).
var ErrRawNotAcquired = errors.New("raw: not acquired")

type rawLock struct {
	c   rueidis.Client
	ttl string
}

// NewRawLock returns the server ceiling of a fenced lock: two EVALSHAs (SET NX PX + INCR of the
// fence counter, then compare-and-DEL) through a cache-free rueidis client, with none of Coordkit's
// checks and a cheap sequential owner token.
func NewRawLock(s Server) (Lock, error) {
	c, err := s.newClient()
	if err != nil {
		return nil, err
	}
	return &rawLock{c: c, ttl: strconv.FormatInt(TTL.Milliseconds(), 10)}, nil
}

func (*rawLock) Name() string { return RawRueidis }

func (r *rawLock) TryAcquireRelease(ctx context.Context, key string) error {
	owner := nextOwner()
	if err := r.acquire(ctx, key, owner); err != nil {
		return err
	}
	return r.release(ctx, key, owner)
}

func (r *rawLock) acquire(ctx context.Context, key, owner string) error {
	lease, fence := lock.Keys(key)
	token, err := rawAcquire.Exec(ctx, r.c, []string{lease, fence}, []string{owner, r.ttl}).AsInt64()
	if err != nil {
		return err
	}
	if token <= 0 {
		return ErrRawNotAcquired
	}
	return nil
}

func (r *rawLock) release(ctx context.Context, key, owner string) error {
	lease, _ := lock.Keys(key)
	n, err := rawRelease.Exec(ctx, r.c, []string{lease}, []string{owner}).AsInt64()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("raw: release deleted %d keys", n)
	}
	return nil
}

func (r *rawLock) Close() { r.c.Close() }
