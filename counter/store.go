package counter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Store runs atomic counter operations over one rueidis client (standalone, Cluster or Sentinel).
// Each counter is one string key holding a decimal int64; an absent (or expired) key reads as 0.
//
// Every operation is one round trip: one Lua script, one GET, or one pipelined batch (the store's
// first call adds one PTTL of its key before it; see [New]). Values are exact
// over the whole int64 range (64-bit values cross the Lua boundary as decimal strings).
//
// While the server is unreachable every call fails at once with [ErrDisconnected] instead of waiting
// on the client's retries and timeouts; a background probe (one goroutine, only while disconnected)
// notices the server is back and calls succeed again without any action. See the package
// documentation for what is and is not detected.
//
// A Store is safe for concurrent use. It never closes the client. Close ends the probe goroutine.
type Store struct {
	client rueidis.Client
	cfg    config

	healthy  atomic.Bool
	closed   atomic.Bool
	verified atomic.Bool // a reply has been read from the server through this store
	verifyMu sync.Mutex  // one first-contact PTTL at a time

	probeCtx    context.Context    // parent of every probe's context, cancelled by Close
	cancelProbe context.CancelFunc // cancels probeCtx

	mu        sync.Mutex
	probing   bool          // a probe goroutine runs
	probeKey  string        // a physical key of the call that found the connection broken
	probeDone chan struct{} // closed when the last probe goroutine started returns; nil before the first
}

// New returns a Store over client. It does no I/O. The first call of the store sends one PTTL of
// its (first) key before its command, a read that reaches that key's node (concurrent first calls
// share it): a Store created while the server is down
// thus fails that call with [ErrDisconnected] and nothing sent, never [ErrUncertain], and fails
// fast from then on until a probe connects. It fails with an error matching [ErrNilClient] for a nil client, and
// with one matching [ErrInvalidConfig] for an invalid option. nil options are ignored.
func New(client rueidis.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errNilClient
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{client: client, cfg: cfg}
	s.probeCtx, s.cancelProbe = context.WithCancel(context.Background())
	s.healthy.Store(true)
	return s, nil
}

// Close makes every later call of the store fail with an error matching [ErrClosed] and ends the
// background probe, if one runs: a probe has nothing left to do once the store is closed, so Close
// cancels it and waits for its goroutine to return until ctx ends (then it returns an error
// wrapping ctx.Err(); the goroutine ends as soon as the client gives the probe's command up). Calls in flight complete normally. Close
// does not close the client. It is idempotent and safe for concurrent use: a later Close waits for
// the probe in the same way and returns nil once it has ended.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed.Store(true)
	s.cancelProbe()
	done := s.probeDone
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("counter: close: waiting for the probe: %w", ctx.Err())
	}
}

// Connected reports whether the store currently considers the server reachable. It is false from the
// first call that found the connection broken (or the first call's PTTL, for a store created while
// the server is down) until a background probe succeeds; a new store reports true until then. It
// does no I/O.
func (s *Store) Connected() bool { return s.healthy.Load() && !s.closed.Load() }

// Result is the outcome of [Store.IncrementUpTo] and [Store.DecrementDownTo].
type Result struct {
	// Allowed reports whether the increment or decrement was applied.
	Allowed bool
	// Value is the counter after the call: the new value when allowed, the unchanged current value
	// (0 for an absent key) when not.
	Value int64
	// Remaining is the key's remaining life on the server after the call, to the millisecond; 0 when
	// the key has no expiry (NoExpiry) or does not exist.
	Remaining time.Duration
	// NoExpiry is true for an existing key without expiry.
	NoExpiry bool
}

// Value is one counter read by [Store.GetMany].
type Value struct {
	// N is the counter's value, 0 when the key is absent.
	N int64
	// Exists reports whether the key exists.
	Exists bool
}

// Increment is one item of [Store.BatchIncrement].
type Increment struct {
	// Key is the counter's logical key (the store's prefix is prepended).
	Key string
	// Delta is added to the counter; any int64, negative to decrement.
	Delta int64
	// TTL, when positive, is set with PEXPIRE on every increment (a sliding expiry); 0 leaves the
	// key's expiry unchanged.
	TTL time.Duration
}

// checkTTL returns nil for a ttl of 0 (none) or at least 1ms, and otherwise an error matching
// [ErrInvalidTTL] and [ErrInvalidConfig] that names what (the argument or option).
func checkTTL(what string, ttl time.Duration) error {
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return luakit.InvalidConfigOf("counter", ErrInvalidTTL, "%s %v must be 0 (none) or at least 1ms", what, ttl)
	}
	return nil
}

// ttlMillis checks ttl (see checkTTL) and returns it in whole milliseconds for a script's ARGV.
func ttlMillis(ttl time.Duration) (string, error) {
	if err := checkTTL("ttl", ttl); err != nil {
		return "", err
	}
	return luakit.FormatInt64(ttl.Milliseconds()), nil
}

func checkDelta(delta int64) error {
	if delta <= 0 {
		return fmt.Errorf("%w: got %d", ErrInvalidDelta, delta)
	}
	return nil
}

// key returns the physical key of name, or an error matching luakit.ErrEmptyKey and
// [ErrInvalidConfig] for an empty name.
func (s *Store) key(name string) (string, error) {
	if name == "" {
		return "", luakit.InvalidConfigOf("counter", luakit.ErrEmptyKey, "key is empty")
	}
	return s.cfg.keys.Key(name), nil
}

// IncrementWithExpire atomically adds delta (any int64, negative to decrement) to the counter at key
// and returns the new value. An absent key starts at 0. When ttl > 0 the key's expiry is set to ttl
// on every call (a sliding window: each increment extends it); ttl == 0 leaves the expiry unchanged
// (none for a new key). One script, one round trip.
//
// Errors: before any I/O, an empty key (luakit.ErrEmptyKey) or a negative or sub-millisecond ttl
// ([ErrInvalidTTL]), both matching [ErrInvalidConfig]; [ErrOverflow] or [ErrNotInteger] with nothing
// written; [ErrDisconnected] at once while the server is unreachable; [ErrUncertain] when the
// increment may have been applied but no reply was read (ctx ended, connection broke); [ErrClosed]
// after Close. ctx bounds the round trip.
func (s *Store) IncrementWithExpire(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER INCREMENT WITH EXPIRE", Instance: s.cfg.instance})
	if err != nil {
		return 0, err
	}
	v, err := s.incrementWithExpire(ctx, key, delta, ttl)
	sc.End(err)
	return v, err
}

// incrementWithExpire is [Store.IncrementWithExpire], run inside its hook scope.
func (s *Store) incrementWithExpire(ctx context.Context, key string, delta int64, ttl time.Duration) (_ int64, err error) {
	k, err := s.key(key)
	if err != nil {
		return 0, err
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return 0, err
	}
	if err := s.refuse(ctx, k); err != nil {
		return 0, err
	}
	v, err := int64Reply(incrScript.Exec(ctx, s.client, []string{k}, []string{luakit.FormatInt64(delta), ms}))
	if err != nil {
		return 0, s.fail(ctx, k, true, err)
	}
	return v, nil
}

// IncrementUpTo atomically adds delta (> 0) to the counter at key if the result is at most limit:
// allowed iff current + delta <= limit, so the new value may equal the limit (an absent key counts
// as 0). When the call creates the key and ttl > 0, the key expires after ttl (a fixed window: later
// increments never extend it; ttl is ignored for an existing key). A refused call writes nothing and
// reports the unchanged value. The comparison is exact over the whole int64 range, and an allowed
// increment cannot overflow. One script, one round trip; ctx bounds it.
//
// Errors: before any I/O, an empty key, delta <= 0 ([ErrInvalidDelta]) or an invalid ttl
// ([ErrInvalidTTL]), all matching [ErrInvalidConfig]; [ErrNotInteger] with nothing written;
// [ErrDisconnected] at once while the server is unreachable; [ErrUncertain] when no reply was read
// after sending; [ErrClosed] after Close. A refusal is not an error.
func (s *Store) IncrementUpTo(ctx context.Context, key string, delta, limit int64, ttl time.Duration) (Result, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER INCREMENT UP TO", Instance: s.cfg.instance})
	if err != nil {
		return Result{}, err
	}
	res, err := s.incrementUpTo(ctx, key, delta, limit, ttl)
	sc.End(err)
	return res, err
}

func (s *Store) incrementUpTo(ctx context.Context, key string, delta, limit int64, ttl time.Duration) (Result, error) {
	k, err := s.key(key)
	if err != nil {
		return Result{}, err
	}
	if err := checkDelta(delta); err != nil {
		return Result{}, err
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return Result{}, err
	}
	if err := s.refuse(ctx, k); err != nil {
		return Result{}, err
	}
	arr, err := limitScript.Exec(ctx, s.client, []string{k},
		[]string{luakit.FormatInt64(delta), luakit.FormatInt64(limit), ms}).ToArray()
	if err != nil {
		return Result{}, s.fail(ctx, k, true, err)
	}
	return decodeBounded(arr, "limit")
}

// foreignReply reports whether a limit or floor script reply is {-3 (foreign), 'not_integer'}: the
// key held a value that is not a canonical decimal int64, and nothing was written.
func foreignReply(arr []rueidis.RedisMessage) bool {
	if len(arr) != 2 {
		return false
	}
	code, err := arr[0].AsInt64()
	if err != nil || code != luakit.StatusForeign {
		return false
	}
	reason, err := arr[1].ToString()
	return err == nil && reason == "not_integer"
}

// decodeBounded decodes the reply of the limit or floor script (name): {allowed, value, pttl}.
func decodeBounded(arr []rueidis.RedisMessage, name string) (Result, error) {
	if foreignReply(arr) {
		return Result{}, ErrNotInteger
	}
	if len(arr) != 3 {
		return Result{}, fmt.Errorf("counter: %s script replied %d elements, want 3", name, len(arr))
	}
	allowed, err := arr[0].AsInt64()
	if err != nil {
		return Result{}, fmt.Errorf("counter: %s script reply: %w", name, err)
	}
	v, err := luakit.Int64(arr[1])
	if err != nil {
		return Result{}, fmt.Errorf("counter: %s script reply: %w", name, err)
	}
	pttl, err := arr[2].AsInt64()
	if err != nil {
		return Result{}, fmt.Errorf("counter: %s script reply: %w", name, err)
	}
	return Result{Allowed: allowed == luakit.StatusOK, Value: v, Remaining: pttlDuration(pttl), NoExpiry: pttl == -1}, nil
}

// pttlDuration maps a PTTL reply to a duration: > 0 for an expiring key (a PTTL of 0, expiry within
// the current millisecond, is reported as 1ms), 0 for no expiry (-1) or an absent key (-2).
func pttlDuration(pttl int64) time.Duration {
	switch {
	case pttl > 0:
		return time.Duration(pttl) * time.Millisecond
	case pttl == 0:
		return time.Millisecond
	}
	return 0
}

// DecrementDownTo atomically subtracts delta (> 0) from the counter at key if the result is at
// least floor: allowed iff current - delta >= floor, so the new value may equal the floor (an absent
// key counts as 0, and an allowed decrement creates it without expiry). The key's expiry is never
// changed (Result.Remaining reports it). A refused call writes nothing and reports the unchanged
// value. The comparison is exact over the whole int64 range. One script, one round trip; ctx bounds
// it.
//
// Errors: as for [Store.IncrementUpTo] (without the ttl check).
func (s *Store) DecrementDownTo(ctx context.Context, key string, delta, floor int64) (Result, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER DECREMENT DOWN TO", Instance: s.cfg.instance})
	if err != nil {
		return Result{}, err
	}
	res, err := s.decrementDownTo(ctx, key, delta, floor)
	sc.End(err)
	return res, err
}

func (s *Store) decrementDownTo(ctx context.Context, key string, delta, floor int64) (Result, error) {
	k, err := s.key(key)
	if err != nil {
		return Result{}, err
	}
	if err := checkDelta(delta); err != nil {
		return Result{}, err
	}
	if err := s.refuse(ctx, k); err != nil {
		return Result{}, err
	}
	arr, err := floorScript.Exec(ctx, s.client, []string{k},
		[]string{luakit.FormatInt64(delta), luakit.FormatInt64(floor)}).ToArray()
	if err != nil {
		return Result{}, s.fail(ctx, k, true, err)
	}
	return decodeBounded(arr, "floor")
}

// Get returns the counter at key, 0 when the key is absent. One GET (not retried by the client, so
// it fails fast when disconnected).
//
// Errors: an empty key before any I/O (matching [ErrInvalidConfig]); [ErrNotInteger] when the key
// holds something else; [ErrDisconnected]; [ErrClosed] after Close; an error wrapping the context's.
func (s *Store) Get(ctx context.Context, key string) (int64, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER GET", Instance: s.cfg.instance})
	if err != nil {
		return 0, err
	}
	v, err := s.get(ctx, key)
	sc.End(err)
	return v, err
}

// get is [Store.Get], run inside its hook scope.
func (s *Store) get(ctx context.Context, key string) (_ int64, err error) {
	k, err := s.key(key)
	if err != nil {
		return 0, err
	}
	if err := s.refuse(ctx, k); err != nil {
		return 0, err
	}
	v, err := int64Reply(s.client.Do(ctx, s.client.B().Arbitrary("GET").Keys(k).Build()))
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		if errors.Is(err, luakit.ErrMalformedInt) {
			return 0, ErrNotInteger // the detail would quote the value
		}
		return 0, s.fail(ctx, k, false, err)
	}
	return v, nil
}

// int64Reply decodes a reply carrying one int64 (see luakit.Int64); a nil reply is rueidis.Nil.
func int64Reply(r rueidis.RedisResult) (int64, error) {
	m, err := r.ToMessage()
	if err != nil {
		return 0, err
	}
	return luakit.Int64(m)
}

// GetMany reads every key, in one round trip: one MGET on a standalone or Sentinel client; on Cluster
// one MGET per hash slot (keys grouped with luakit.Slot), sent together with DoMulti. The result has
// one [Value] per key, in input order. Reads of different slots are not one atomic snapshot. A key
// of another type reads as absent (MGET replies nil for it; [Store.Get] reports [ErrNotInteger]).
// While a slot migrates, a node refuses an MGET whose keys are split between it and the other node
// with TRYAGAIN: that MGET is sent again (luakit.DoMulti) for up to luakit.TryAgainBudget (500 ms)
// within ctx, after which the TRYAGAIN error is returned (luakit.IsTransient reports true for it).
//
// Errors: an empty key before any I/O (matching [ErrInvalidConfig]); [ErrDisconnected]; [ErrClosed]
// after Close; an error wrapping the context's; otherwise a *[BatchError] with [ErrNotInteger] for
// each key holding something else (the other values are still returned).
func (s *Store) GetMany(ctx context.Context, keys []string) ([]Value, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER GET MANY", Instance: s.cfg.instance})
	if err != nil {
		return nil, err
	}
	v, err := s.getMany(ctx, keys)
	sc.End(err)
	return v, err
}

// getMany is [Store.GetMany], run inside its hook scope.
func (s *Store) getMany(ctx context.Context, keys []string) (_ []Value, err error) {
	phys := make([]string, len(keys))
	for i, name := range keys {
		if name == "" {
			return nil, luakit.InvalidConfigOf("counter", luakit.ErrEmptyKey, "key %d is empty", i)
		}
		phys[i] = s.cfg.keys.Key(name)
	}
	out := make([]Value, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if err := s.refuse(ctx, phys[0]); err != nil {
		return nil, err
	}
	// groups[i] lists the input indexes of one MGET.
	var groups [][]int
	if s.client.Mode() == rueidis.ClientModeCluster {
		bySlot := map[uint16]int{}
		for i, k := range phys {
			slot := luakit.Slot(k)
			g, ok := bySlot[slot]
			if !ok {
				g = len(groups)
				bySlot[slot] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
	} else {
		all := make([]int, len(phys))
		for i := range all {
			all[i] = i
		}
		groups = [][]int{all}
	}
	cmds := make(rueidis.Commands, len(groups))
	for g, idx := range groups {
		ks := make([]string, len(idx))
		for j, i := range idx {
			ks[j] = phys[i]
		}
		cmds[g] = s.client.B().Arbitrary("MGET").Keys(ks...).Build()
	}
	var errs []error
	for g, res := range luakit.DoMulti(ctx, s.client, cmds...) {
		arr, err := res.ToArray()
		if err == nil && len(arr) != len(groups[g]) {
			err = fmt.Errorf("counter: MGET replied %d values for %d keys", len(arr), len(groups[g]))
		}
		if err != nil {
			return nil, s.fail(ctx, phys[groups[g][0]], false, err)
		}
		for j, i := range groups[g] {
			v, err := luakit.Int64(arr[j])
			switch {
			case rueidis.IsRedisNil(err):
			case err != nil:
				if errs == nil {
					errs = make([]error, len(keys))
				}
				errs[i] = ErrNotInteger // the detail would quote the value
			default:
				out[i] = Value{N: v, Exists: true}
			}
		}
	}
	if errs != nil {
		return out, &BatchError{Errs: errs}
	}
	return out, nil
}

// BatchIncrement applies every increment as [Store.IncrementWithExpire] would, pipelined in one round
// trip (one EVALSHA per item; on Cluster, rueidis sends each node its items together). After the
// server lost its script cache (restart, failover, SCRIPT FLUSH) the items that met NOSCRIPT, which
// ran nothing, are re-sent with EVAL in a second round trip. It returns the new values in input
// order. Each item is atomic on its own; the batch as a whole is not (a failure of one item does not
// undo the others). Items may repeat a key; they then apply in input order.
//
// Errors: [ErrDisconnected] at once (nothing sent) while the server is unreachable; otherwise nil or
// a *[BatchError] with one entry per item: a validation error (empty key, invalid TTL, matching
// [ErrInvalidConfig]; that item is not sent), [ErrOverflow] / [ErrNotInteger] (nothing written for
// that item), [ErrUncertain] (the item may have been applied). The value of a failed item is 0.
// [ErrClosed] after Close.
func (s *Store) BatchIncrement(ctx context.Context, items []Increment) ([]int64, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, luakit.Operation{Primitive: "counter", Name: "COUNTER BATCH INCREMENT", Instance: s.cfg.instance})
	if err != nil {
		return nil, err
	}
	v, err := s.batchIncrement(ctx, items)
	sc.End(err)
	return v, err
}

// batchIncrement is [Store.BatchIncrement], run inside its hook scope.
func (s *Store) batchIncrement(ctx context.Context, items []Increment) (_ []int64, err error) {
	out := make([]int64, len(items))
	errs := make([]error, len(items))
	failed := false
	execs := make([]rueidis.LuaExec, 0, len(items))
	sent := make([]int, 0, len(items))
	for i, it := range items {
		k, err := s.key(it.Key)
		if err == nil {
			var ms string
			if ms, err = ttlMillis(it.TTL); err == nil {
				execs = append(execs, rueidis.LuaExec{Keys: []string{k}, Args: []string{luakit.FormatInt64(it.Delta), ms}})
				sent = append(sent, i)
				continue
			}
		}
		errs[i], failed = err, true
	}
	if len(execs) > 0 {
		if err := s.refuse(ctx, execs[0].Keys[0]); err != nil {
			return nil, err
		}
		for j, res := range incrScript.ExecMulti(ctx, s.client, execs...) {
			i := sent[j]
			v, err := int64Reply(res)
			if err != nil {
				errs[i], failed = s.fail(ctx, execs[j].Keys[0], true, err), true
				continue
			}
			out[i] = v
		}
	}
	if failed {
		return out, &BatchError{Errs: errs}
	}
	return out, nil
}
