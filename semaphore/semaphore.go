package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Forever is what [Permit.Remaining] returns for a held permit without expiry (the largest Duration,
// so a comparison with any deadline holds; 0 means the permit ended). [Permit.NoExpiry] says the same.
const Forever = ownership.Forever

// MetricCleanupAbandoned is the name of the Int64Counter incremented each time a cleanup release is given
// up (its background retries ran out of time, the server rejected it terminally, or [Semaphore.Close]
// stopped it). Attributes: "stage" ("acquire" after an uncertain, failed or late acquisition, "close"
// after [Permit.Close]) and "reason" (the [luakit.Class] of the last error: "uncertain", "transient",
// "terminal", "unknown"; or "closed"), and "coordkit.instance" ([AttrInstance]) with the [WithInstance]
// name, omitted when there is none. Keys and tokens are never attributes.
const MetricCleanupAbandoned = "coordkit.coordination.cleanup.abandoned"

// AttrInstance is the attribute key of the instance name ([WithInstance]) on the package's instruments.
const AttrInstance = "coordkit.instance"

// meterName is the instrumentation scope of the package's instruments.
const meterName = "github.com/coordkit/coordkit/semaphore"

// maxCapacity is the largest capacity a sorted-set score (a double) holds exactly.
const maxCapacity = 1 << 53

// Semaphore hands out up to a fixed number of expiring permits on one key through one rueidis client.
// Create it with [New]; it is safe for concurrent use by many goroutines. The zero value is not usable.
//
// A Semaphore never closes or reconfigures the caller's client. It starts goroutines only to retry
// unconfirmed cleanup releases in the background; [Semaphore.Close] waits for them (and stops them
// when its ctx ends).
type Semaphore struct {
	client    rueidis.Client
	name      string   // as given, without prefix
	key       string   // physical key
	keys      []string // {key}: the scripts' KEYS, shared read-only
	capacity  int64
	capArg    string
	cfg       config
	abandoned metric.Int64Counter

	waiter  ownership.Waiter // its Config is &cfg.own, shared by every permit of this Semaphore
	tracker *luakit.Tracker  // WithTracker's, else TrackerOf(client); nil: none

	bgCtx    context.Context
	bgCancel context.CancelFunc
	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup
}

// New returns a Semaphore of capacity permits on key. It does no I/O.
//
// key is binary-safe, must not be empty, and gets the [WithKeyPrefix] prefix; it needs no hash tag on
// Cluster (one key per semaphore). Use a dedicated key. capacity must be in [1, 2^53]; every contender
// on the key must use the same capacity (see [ErrCapacityMismatch]).
//
// New fails with an error wrapping [ErrNilClient] for a nil client, and otherwise with an error
// matching [ErrInvalidConfig]: one wrapping [luakit.ErrEmptyKey], [ErrInvalidCapacity], or a
// descriptive error for an invalid option.
func New(client rueidis.Client, key string, capacity int64, opts ...Option) (*Semaphore, error) {
	if client == nil {
		return nil, fmt.Errorf("semaphore: %w", ErrNilClient)
	}
	if err := luakit.ValidateKey("semaphore key", key); err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	if capacity < 1 || capacity > maxCapacity {
		return nil, fmt.Errorf("%w (got %d)", ErrInvalidCapacity, capacity)
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
	counter, err := cfg.provider().Meter(meterName).Int64Counter(MetricCleanupAbandoned,
		metric.WithUnit("{cleanup}"),
		metric.WithDescription("Cleanup releases of coordination state given up after their retries."))
	if err != nil {
		return nil, fmt.Errorf("semaphore: metric %s: %w", MetricCleanupAbandoned, err)
	}
	bgCtx, bgCancel := context.WithCancel(context.Background())
	physical := cfg.keys.Key(key)
	s := &Semaphore{
		client: client, name: key, key: physical, keys: []string{physical},
		capacity: capacity, capArg: strconv.FormatInt(capacity, 10),
		cfg: cfg, abandoned: counter,
		tracker: cfg.tracker,
		bgCtx:   bgCtx, bgCancel: bgCancel,
	}
	if s.tracker == nil {
		s.tracker = luakit.TrackerOf(client)
	}
	// The sorted set survives a release while other permits are active.
	s.cfg.own.RetryClose = func(err error, release func(context.Context) error) { s.retryLater(stageClose, err, release) }
	s.waiter = ownership.Waiter{Client: client, Tracker: s.tracker, Config: &s.cfg.own, KeyPersists: true}
	return s, nil
}

// Key returns the semaphore key as given to [New] (without the key prefix).
func (s *Semaphore) Key() string { return s.name }

// Capacity returns the capacity given to [New].
func (s *Semaphore) Capacity() int64 { return s.capacity }

// noExpiryArg is the scripts' TTL argument of a permit without expiry; no TTL a caller gives maps to
// it (see ttlArg).
const noExpiryArg = "0"

// ttlArg validates a permit TTL and returns it in whole milliseconds: at least 1ms, so 0 (or a
// negative TTL) is ErrInvalidTTL, never a permit without expiry.
func ttlArg(ttl time.Duration) (string, time.Duration, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return "", 0, fmt.Errorf("semaphore: %w: a permit's TTL must be at least 1ms (got %v; "+
			"TryAcquireNoExpiry and AcquireNoExpiry take permits without expiry)", ErrInvalidTTL, ttl)
	}
	return strconv.FormatInt(ms, 10), time.Duration(ms) * time.Millisecond, nil
}

func (s *Semaphore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// TryAcquire makes one attempt to take a permit and returns at once: it does not queue, wait or promise
// fairness (see [Semaphore.Acquire] for that). It blocks for one round trip, bounded by ctx. ttl is the
// permit's lifetime on the server clock, truncated to whole milliseconds; below 1ms (0 included) it
// fails with [ErrInvalidTTL] before any I/O. Expired permits are pruned first.
//
// It returns the held [*Permit] on success. Otherwise it returns a nil Permit and:
//   - [ErrNotAcquired] when capacity permits are active;
//   - a [*CapacityMismatchError] ([ErrCapacityMismatch]) when permits are active under a different
//     capacity (with none active, this Semaphore's capacity is adopted instead);
//   - an error wrapping [ErrLateReply] (the grant arrived after the permit's local estimate elapsed)
//     or [ErrUncertain] and the cause, such as ctx.Err() (the script may have run, no reply was read):
//     an owner-token release is then sent behind it (see the package documentation, "Ownership");
//   - an error wrapping [ErrClosed] after [Semaphore.Close] (nothing sent);
//   - any other server or connection error, classified by [luakit.Classify]; an error reply (NOPERM,
//     WRONGTYPE, a transient one) stops the script before its first write, so no release is sent.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.TryAcquireN(ctx, 1, ttl)
}

// TryAcquireN is [Semaphore.TryAcquire] for a permit of weight n: one handle holding n units of the
// capacity (as golang.org/x/sync/semaphore's Acquire(ctx, n)), granted only when n units are free and
// renewed, verified and released as one. n must be 1 to the capacity: otherwise it fails before any
// I/O with an error matching [ErrInvalidConfig]. Inspect lists such a permit n times.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	ctx, sc, err := s.cfg.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	ms, ttl, err := ttlArg(ttl)
	if err == nil {
		err = s.checkWeight(n)
	}
	var p *Permit
	if err == nil {
		p, err = s.tryAcquire(ctx, ms, ttl, n)
	}
	endAcquire(&sc, err)
	return p, err
}

// TryAcquireNoExpiry is [Semaphore.TryAcquire] for a permit without expiry: it lasts until released
// (a crashed holder keeps it for ever), [Permit.Remaining] is [Forever] and KeepAlive does nothing.
// Prefer a finite TTL; use it for a slot that an operator frees by hand. A late or uncertain
// acquisition's cleanup has no TTL to fall back on if its background retries all fail.
func (s *Semaphore) TryAcquireNoExpiry(ctx context.Context) (*Permit, error) {
	ctx, sc, err := s.cfg.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	p, err := s.tryAcquire(ctx, noExpiryArg, 0, 1)
	endAcquire(&sc, err)
	return p, err
}

// tryAcquire is one attempt for a permit of weight n with a validated TTL argument (noExpiryArg and 0
// for none).
func (s *Semaphore) tryAcquire(ctx context.Context, ms string, ttl time.Duration, n int64) (*Permit, error) {
	if s.isClosed() {
		return nil, errClosed
	}
	p := s.newPermit(ms, ttl, n)
	if a := s.cfg.own.Try(ctx, "acquire", &p.b); a.Err != nil {
		return nil, a.Err
	}
	return p, nil
}

// Acquire takes a permit like [Semaphore.TryAcquire], waiting while capacity permits are active. It
// waits as the contract in package github.com/coordkit/coordkit/luakit/ownership says: without polling,
// it sleeps until the semaphore key is invalidated (any permit released, added, renewed or pruned
// changes the sorted set; see [WithTracker]) or the earliest active permit expires, then tries again;
// only the script grants a permit. While a full semaphore holds only permits without expiry on a
// client without working tracking, it re-checks once a second. Transient server errors, refused
// connections and late grants are retried after the retry delay, and so is an uncertain attempt once
// its owner-token cleanup was answered; a capacity mismatch and other errors end the wait. It does not queue: waiters are not
// served in arrival order.
//
// It blocks until a permit is acquired, ctx ends, or a non-retryable error occurs. When ctx ends it
// returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its cleanup is
// sent). After [Semaphore.Close] it returns an error wrapping [ErrClosed] at once, or at its next
// attempt when it was already waiting. ttl is validated as for TryAcquire, before any I/O.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.AcquireN(ctx, 1, ttl)
}

// AcquireN is [Semaphore.Acquire] for a permit of weight n (see [Semaphore.TryAcquireN]): it waits
// until n units are free at once. Waiters are not served in order, so a heavy waiter may wait while
// lighter ones keep being served.
func (s *Semaphore) AcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	ctx, sc, err := s.cfg.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	ms, ttl, err := ttlArg(ttl)
	if err == nil {
		err = s.checkWeight(n)
	}
	var p *Permit
	if err == nil {
		p, err = s.acquire(ctx, ms, ttl, n)
	}
	sc.End(err)
	return p, err
}

// AcquireNoExpiry is [Semaphore.Acquire] for a permit without expiry, as [Semaphore.TryAcquireNoExpiry]
// takes one.
func (s *Semaphore) AcquireNoExpiry(ctx context.Context) (*Permit, error) {
	ctx, sc, err := s.cfg.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	p, err := s.acquire(ctx, noExpiryArg, 0, 1)
	sc.End(err)
	return p, err
}

// acquire waits for a permit of weight n with a validated TTL argument (noExpiryArg and 0 for none).
func (s *Semaphore) acquire(ctx context.Context, ms string, ttl time.Duration, n int64) (*Permit, error) {
	var p *Permit
	err := s.waiter.Wait(ctx, s.key, func(ctx context.Context) ownership.TryResult {
		return s.attempt(ctx, ms, ttl, n, &p)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// attempt is one try of a waiting acquisition, with a fresh owner token; a granted permit is stored
// in *out.
func (s *Semaphore) attempt(ctx context.Context, ms string, ttl time.Duration, n int64, out **Permit) ownership.TryResult {
	if s.isClosed() {
		return ownership.TryResult{Err: errClosed}
	}
	p := s.newPermit(ms, ttl, n)
	a := s.cfg.own.Try(ctx, "acquire", &p.b)
	if a.Err == nil {
		*out = p
	}
	return a
}

// newPermit makes the Permit of weight n that one acquisition attempt grants, with a fresh owner
// token.
func (s *Semaphore) newPermit(ms string, ttl time.Duration, n int64) *Permit {
	w := "1"
	if n != 1 {
		w = strconv.FormatInt(n, 10)
	}
	p := &Permit{b: backend{s: s, owner: [2]string{luakit.OwnerToken(), w}, ms: ms, ttl: ttl, weight: n}}
	p.b.own = &p.own
	return p
}

// checkWeight refuses a permit weight outside [1, capacity].
func (s *Semaphore) checkWeight(n int64) error {
	if n < 1 || n > s.capacity {
		return luakit.InvalidConfig("semaphore", "permit weight %d must be between 1 and the capacity %d", n, s.capacity)
	}
	return nil
}

// decodeAcquire decodes acquire.lua's status row: {ok, active}, {busy, active, wait_ms} (wait -1: the
// earliest permit has no expiry) or {mismatch, stored}; value is active or stored (an integer or a
// decimal string).
func decodeAcquire(arr []rueidis.RedisMessage) (status, value int64, wait time.Duration, err error) {
	if len(arr) < 2 {
		return 0, 0, 0, fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	status, err = arr[0].AsInt64()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("status: %w", err)
	}
	want := 2
	if status == luakit.StatusBusy {
		want = 3
	}
	if len(arr) != want || (status != luakit.StatusOK && status != luakit.StatusBusy && status != luakit.StatusMismatch) {
		return 0, 0, 0, fmt.Errorf("unexpected reply: status %d with %d elements", status, len(arr))
	}
	value, err = luakit.Int64(arr[1])
	if err != nil {
		return 0, 0, 0, fmt.Errorf("value: %w", err)
	}
	if status != 0 {
		return status, value, 0, nil
	}
	ms, err := arr[2].AsInt64()
	switch {
	case err != nil:
		return 0, 0, 0, fmt.Errorf("wait: %w", err)
	case ms == -1:
		return 0, value, -1, nil
	case ms < 0:
		return 0, 0, 0, fmt.Errorf("unexpected wait %d", ms)
	}
	return 0, value, time.Duration(ms) * time.Millisecond, nil
}

// endAcquire completes an acquisition's hook scope: ErrNotAcquired is an answer, not a failure.
func endAcquire(sc *luakit.Scope, err error) {
	if errors.Is(err, ErrNotAcquired) {
		sc.EndWith(luakit.OutcomeSucceeded, err)
		return
	}
	sc.End(err)
}
