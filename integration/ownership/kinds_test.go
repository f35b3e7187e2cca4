package ownership_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
	"github.com/coordkit/coordkit/testkit"
)

// handle is what every owner-token handle writes on its own type over its private ownership.Handle:
// the surface the contract is about. Each kind's handle type must satisfy it (checked at compile time
// below).
type handle interface {
	Extend(ctx context.Context) (bool, error)
	ExtendTTL(ctx context.Context, ttl time.Duration) (bool, error)
	KeepAlive(ctx context.Context) error
	Verify(ctx context.Context) (bool, error)
	Release(ctx context.Context) (ownership.Outcome, error)
	Close() error
	Done() <-chan struct{}
	Context() context.Context
	Err() error
	Remaining() time.Duration
	Deadline() time.Time
	TTL() time.Duration
	// The identity accessors (vocabulary rule: the same on every handle).
	Name() string
	OwnerToken() string
}

// fenced is a handle of a kind that issues fencing tokens.
type fenced interface {
	handle
	FencingToken() int64
}

var (
	_ handle = (*lock.Lease)(nil)
	_ handle = (*lease.Lease)(nil)
	_ handle = (*rwlock.Lease)(nil)
	_ handle = (*semaphore.Permit)(nil)
	_ handle = (*redlock.Lease)(nil)
	_ fenced = (*lock.Lease)(nil)
	_ fenced = (*redlock.Lease)(nil)
)

// acquireFunc is one way of acquiring a kind's hold of one resource.
type acquireFunc func(ctx context.Context, ttl time.Duration) (handle, error)

// factory is a kind's factory (Locker, Leases, Semaphore, Group...) bound to one resource.
type factory struct {
	try     acquireFunc // try-acquisition of the kind's hold
	acquire acquireFunc // waiting acquisition of the kind's hold
	// tryRival and acquireRival take a hold that conflicts with the kind's: the same hold, except for
	// rwlock's read kind, whose rival is a writer (readers share).
	tryRival, acquireRival acquireFunc
}

// factoryOptions are the few settings a scenario changes; zero values keep the module's defaults.
type factoryOptions struct {
	cleanupTimeout time.Duration // bound of the owner-checked cleanup after an uncertain acquisition
}

// kind is one handle type under the contract, with how to reach and observe its hold.
type kind struct {
	name string
	// quorum: the factory takes one client per server of env.quorum (redlock).
	quorum bool
	// needs reports why the kind cannot run on e ("" when it can). unsupported is then the error a
	// try-acquisition must return there (nil: the kind is not offered on that target at all).
	needs       func(e *env) string
	unsupported error
	// retriesEvery, when set, marks the kind's documented exception to the contract's "waiting
	// acquisition" row: its waiting acquisition retries after a random delay of this mean (drawn from
	// [d/2, 3d/2)) instead of sleeping on invalidations and the holders' TTL.
	retriesEvery time.Duration
	// newFactory builds a factory of the kind over cs (one client, or one per quorum server) for res.
	newFactory func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory
	// slotKey is the key whose slot holds res (on a cluster); for every kind it is also the key of
	// the hold itself.
	slotKey func(res string) string
	// foreignIsHeld: the hold is a plain string, so another string at its key reads as another
	// owner's hold (lock, redlock) instead of foreign data.
	foreignIsHeld bool
	// holds reports whether some owner holds res on the server c reaches; remove deletes that hold,
	// as an operator (or a data loss) would. Both go through an assertion client.
	holds  func(ctx context.Context, c rueidis.Client, res string) (bool, error)
	remove func(ctx context.Context, c rueidis.Client, res string) error
}

// asHandle turns a module's (handle pointer, error) into (handle, error) without a typed nil.
func asHandle[H handle](h H, err error) (handle, error) {
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Key layouts (no key prefix: the physical keys are these). Every key of one resource shares the
// hash tag {o:<res>}.
func lockKeys(res string) (leaseKey, fenceKey string) { return lock.Keys(lockName(res)) }
func lockName(res string) string                      { return "o:" + res }
func leaseHash(res string) string                     { return "{o:" + res + "}:leases" }

const leaseField = "holder"

func rwKey(res string) string   { return "{o:" + res + "}:rw" }
func semKey(res string) string  { return "{o:" + res + "}:sem" }
func lockKey(res string) string { k, _ := lockKeys(res); return k }
func redKey(res string) string  { return "{o:" + res + "}:redlock" }

// keyExists reports whether key exists (a hold whose key expires with it, or is deleted with it).
func keyExists(key func(string) string) func(context.Context, rueidis.Client, string) (bool, error) {
	return func(ctx context.Context, c rueidis.Client, res string) (bool, error) {
		n, err := c.Do(ctx, c.B().Exists().Key(key(res)).Build()).AsInt64()
		return n == 1, err
	}
}

// delKey deletes key.
func delKey(key func(string) string) func(context.Context, rueidis.Client, string) error {
	return func(ctx context.Context, c rueidis.Client, res string) error {
		return c.Do(ctx, c.B().Del().Key(key(res)).Build()).Error()
	}
}

func always(*env) string { return "" }

func standaloneOnly(e *env) string {
	if e.IsCluster() {
		return "redlock spans independent servers; cluster clients are rejected"
	}
	return ""
}

// hashFieldTTL: the lease module needs HPEXPIRE (Redis 7.4+, Valkey 9+): redis8, valkey9 and the
// clusters built of them.
func hashFieldTTL(e *env) string {
	switch e.target.Server {
	case testkit.Redis8, testkit.Valkey9:
		return ""
	}
	return "no hash-field expiry on " + string(e.target.Server)
}

func rwlockKind(name string, write bool) *kind {
	return &kind{
		name:  name,
		needs: always,
		newFactory: func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory {
			var opts []rwlock.Option
			if o.cleanupTimeout > 0 {
				opts = append(opts, rwlock.WithCleanupTimeout(o.cleanupTimeout))
			}
			l, err := rwlock.New(cs[0], opts...)
			require.NoError(t, err)
			key := rwKey(res)
			tryR := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.TryAcquireRead(ctx, key, ttl))
			}
			acqR := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.AcquireRead(ctx, key, ttl))
			}
			tryW := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.TryAcquireWrite(ctx, key, ttl))
			}
			acqW := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.AcquireWrite(ctx, key, ttl))
			}
			if write {
				return &factory{try: tryW, acquire: acqW, tryRival: tryW, acquireRival: acqW}
			}
			return &factory{try: tryR, acquire: acqR, tryRival: tryW, acquireRival: acqW}
		},
		slotKey: rwKey,
		// The sorted set's key expires with its latest entry and vanishes with its last one.
		holds:  keyExists(rwKey),
		remove: delKey(rwKey),
	}
}

// kinds is every handle under the contract.
var kinds = []*kind{
	{
		name:  "lock",
		needs: always,
		newFactory: func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory {
			var opts []lock.Option
			if o.cleanupTimeout > 0 {
				opts = append(opts, lock.WithCleanupTimeout(o.cleanupTimeout))
			}
			l, err := lock.New(cs[0], opts...)
			require.NoError(t, err)
			name := lockName(res) // keys {o:<res>}:lease, {o:<res>}:fence
			try := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.TryAcquire(ctx, name, ttl))
			}
			acq := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(l.Acquire(ctx, name, ttl))
			}
			return &factory{try: try, acquire: acq, tryRival: try, acquireRival: acq}
		},
		slotKey:       lockKey,
		foreignIsHeld: true,
		holds:         keyExists(lockKey),
		remove:        delKey(lockKey),
	},
	{
		name:        "lease",
		needs:       hashFieldTTL,
		unsupported: luakit.ErrUnsupported,
		newFactory: func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory {
			var opts []lease.Option
			if o.cleanupTimeout > 0 {
				opts = append(opts, lease.WithCleanupTimeout(o.cleanupTimeout))
			}
			ls, err := lease.New(cs[0], opts...)
			require.NoError(t, err)
			h := leaseHash(res)
			try := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(ls.TryAcquire(ctx, h, leaseField, ttl))
			}
			acq := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(ls.Acquire(ctx, h, leaseField, ttl))
			}
			return &factory{try: try, acquire: acq, tryRival: try, acquireRival: acq}
		},
		slotKey: leaseHash,
		holds: func(ctx context.Context, c rueidis.Client, res string) (bool, error) {
			return c.Do(ctx, c.B().Hexists().Key(leaseHash(res)).Field(leaseField).Build()).AsBool()
		},
		remove: func(ctx context.Context, c rueidis.Client, res string) error {
			return c.Do(ctx, c.B().Hdel().Key(leaseHash(res)).Field(leaseField).Build()).Error()
		},
	},
	rwlockKind("rwlock-read", false),
	rwlockKind("rwlock-write", true),
	{
		name:  "semaphore",
		needs: always,
		newFactory: func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory {
			var opts []semaphore.Option
			if o.cleanupTimeout > 0 {
				opts = append(opts, semaphore.WithCleanupTimeout(o.cleanupTimeout))
			}
			// Capacity 1, so that "held by another" means something.
			s, err := semaphore.New(cs[0], semKey(res), 1, opts...)
			require.NoError(t, err)
			// Registered after the client's Close, so it runs before it.
			t.Cleanup(func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := s.Close(sctx); err != nil {
					t.Errorf("semaphore close: %v", err)
				}
			})
			try := func(ctx context.Context, ttl time.Duration) (handle, error) { return asHandle(s.TryAcquire(ctx, ttl)) }
			acq := func(ctx context.Context, ttl time.Duration) (handle, error) { return asHandle(s.Acquire(ctx, ttl)) }
			return &factory{try: try, acquire: acq, tryRival: try, acquireRival: acq}
		},
		slotKey: semKey,
		// Permits score above 0 (their expiry, or +inf); the "#capacity" member scores -capacity.
		holds: func(ctx context.Context, c rueidis.Client, res string) (bool, error) {
			n, err := c.Do(ctx, c.B().Zcount().Key(semKey(res)).Min("0").Max("+inf").Build()).AsInt64()
			return n > 0, err
		},
		remove: delKey(semKey),
	},
	{
		name:   "redlock",
		quorum: true,
		needs:  standaloneOnly,
		// redlock.Group.Acquire: "Unlike the other Coordkit primitives' blocking acquisitions it does
		// not wake on key invalidations: contenders woken together by one release would split the
		// nodes' votes". Not in luakit/ownership's contract table.
		retriesEvery: redlock.DefaultRetryDelay,
		newFactory: func(t *testing.T, cs []rueidis.Client, res string, o factoryOptions) *factory {
			// The conformance scenarios start their servers seconds before acquiring: the restart
			// quarantine (on by default) would keep those nodes out of every quorum for a TTL. It is
			// tested in integration/redlock.
			opts := []redlock.Option{redlock.WithRestartQuarantine(false)}
			if o.cleanupTimeout > 0 {
				opts = append(opts, redlock.WithNodeTimeout(o.cleanupTimeout))
			}
			g, err := redlock.NewGroup(cs, opts...)
			require.NoError(t, err)
			key := redKey(res)
			try := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(g.TryAcquire(ctx, key, ttl))
			}
			acq := func(ctx context.Context, ttl time.Duration) (handle, error) {
				return asHandle(g.Acquire(ctx, key, ttl))
			}
			return &factory{try: try, acquire: acq, tryRival: try, acquireRival: acq}
		},
		slotKey:       redKey,
		foreignIsHeld: true,
		holds:         keyExists(redKey),
		remove:        delKey(redKey),
	},
}

// TestHandlesSealed checks, from outside the primitives' modules, that no handle type exposes the
// core: no exported field (such as an embedded ownership.Handle) and none of the core's plumbing
// methods, while the contract's methods are there.
func TestHandlesSealed(t *testing.T) {
	plumbing := []string{"Grant", "ReleaseOwed", "CloseContext", "Settled"}
	for _, h := range []handle{(*lock.Lease)(nil), (*lease.Lease)(nil), (*rwlock.Lease)(nil), (*semaphore.Permit)(nil), (*redlock.Lease)(nil)} {
		typ := reflect.TypeOf(h)
		t.Run(typ.Elem().String(), func(t *testing.T) {
			for i := range typ.Elem().NumField() {
				f := typ.Elem().Field(i)
				require.False(t, f.IsExported(), "exported field %s", f.Name)
			}
			for _, m := range plumbing {
				_, ok := typ.MethodByName(m)
				require.False(t, ok, "method %s reachable", m)
			}
			for _, m := range []string{"Extend", "ExtendTTL", "KeepAlive", "Verify", "Release", "Close", "Done", "Context", "Err", "Remaining", "Deadline", "TTL", "Name", "OwnerToken"} {
				_, ok := typ.MethodByName(m)
				require.True(t, ok, "method %s missing", m)
			}
		})
	}
}
