package semaphore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// NoExpiry is the TTL of a permit that lasts until it is released: pass it to [Semaphore.TryAcquire] or
// [Permit.Extend]. Prefer a finite TTL (see the package documentation).
const NoExpiry time.Duration = 0

// Forever is what [Permit.Remaining] returns for a held permit without expiry.
const Forever time.Duration = math.MaxInt64

// MetricCleanupAbandoned is the name of the Int64Counter incremented each time a cleanup release is given
// up (its background retries ran out of time, the server rejected it terminally, or
// [Semaphore.Shutdown] stopped it). Attributes: "stage" ("acquire", "extend" or "close") and "reason"
// (the [luakit.Class] of the last error: "uncertain", "transient", "terminal", "unknown"; or
// "shutdown"). Keys and tokens are never attributes.
const MetricCleanupAbandoned = "coordkit.coordination.cleanup.abandoned"

// meterName is the instrumentation scope of the package's instruments.
const meterName = "github.com/coordkit/coordkit/semaphore"

// maxCapacity is the largest capacity a sorted-set score (a double) holds exactly.
const maxCapacity = 1 << 53

// Semaphore hands out up to a fixed number of expiring permits on one key through one rueidis client.
// Create it with [New]; it is safe for concurrent use by many goroutines. The zero value is not usable.
//
// A Semaphore never closes or reconfigures the caller's client. It starts goroutines only to retry
// unconfirmed cleanup releases in the background; [Semaphore.Shutdown] waits for them (and stops them
// when its ctx ends).
type Semaphore struct {
	client    rueidis.Client
	name      string // as given, without prefix
	key       string // physical key
	capacity  int64
	capArg    string
	cfg       config
	abandoned metric.Int64Counter

	bgCtx    context.Context
	bgCancel context.CancelFunc
	mu       sync.Mutex
	shut     bool
	wg       sync.WaitGroup
}

// New returns a Semaphore of capacity permits on key. It does no I/O.
//
// key is binary-safe, must not be empty, and gets the [WithKeyPrefix] prefix; it needs no hash tag on
// Cluster (one key per semaphore). Use a dedicated key. capacity must be in [1, 2^53]; every contender
// on the key must use the same capacity (see [ErrCapacityMismatch]).
//
// New fails with [ErrNilClient], an error wrapping [luakit.ErrEmptyKey], [ErrInvalidCapacity], or a
// descriptive error for an invalid option.
func New(client rueidis.Client, key string, capacity int64, opts ...Option) (*Semaphore, error) {
	if client == nil {
		return nil, ErrNilClient
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
	return &Semaphore{
		client: client, name: key, key: cfg.keys.Key(key),
		capacity: capacity, capArg: strconv.FormatInt(capacity, 10),
		cfg: cfg, abandoned: counter,
		bgCtx: bgCtx, bgCancel: bgCancel,
	}, nil
}

// Key returns the semaphore key as given to [New] (without the key prefix).
func (s *Semaphore) Key() string { return s.name }

// Capacity returns the capacity given to [New].
func (s *Semaphore) Capacity() int64 { return s.capacity }

// ttlArg validates a permit TTL and returns it in whole milliseconds ("0" for NoExpiry).
func ttlArg(ttl time.Duration) (string, time.Duration, error) {
	if ttl == NoExpiry {
		return "0", 0, nil
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return "", 0, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	return strconv.FormatInt(ms, 10), time.Duration(ms) * time.Millisecond, nil
}

// TryAcquire makes one attempt to take a permit and returns at once: it does not queue, poll or promise
// fairness.
//
// ttl is the permit's lifetime on the server clock, truncated to whole milliseconds (at least 1ms), or
// [NoExpiry] (0) for a permit that lasts until released. A negative or sub-millisecond ttl fails with
// [ErrInvalidTTL] before any I/O. Expired permits are pruned first.
//
// It returns the held [*Permit] on success. Otherwise it returns a nil Permit and:
//   - [ErrNotAcquired] when capacity permits are active;
//   - a [*CapacityMismatchError] (wrapping [ErrCapacityMismatch]) when permits are active under a
//     different capacity (with no active permit, this Semaphore's capacity is adopted instead);
//   - [ErrLateReply] when the grant arrived after the permit's local estimate elapsed;
//   - an error wrapping [ErrUncertain] and the cause (such as ctx.Err()) when the script may have run
//     but no reply was read;
//   - [ErrShutdown] after [Semaphore.Shutdown];
//   - any other server or connection error, classified by [luakit.Classify].
//
// After a late, uncertain or failed (error reply) acquisition, an owner-token release bounded by the
// cleanup timeout is sent even if ctx is cancelled, then retried in the background; a finite ttl is the
// fallback if it never lands. A delayed acquisition can still reach the server after that release (it
// may travel on another connection); the permit then lives until its ttl, or, with NoExpiry, until the
// key is cleaned by hand. Prefer a finite ttl.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	ms, ttl, err := ttlArg(ttl)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	shut := s.shut
	s.mu.Unlock()
	if shut {
		return nil, ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("semaphore: acquire: %w", err)
	}
	owner, err := luakit.NewOwnerToken()
	if err != nil {
		return nil, fmt.Errorf("semaphore: owner token: %w", err)
	}
	start := time.Now()
	arr, err := acquireScript.Exec(ctx, s.client, []string{s.key}, []string{owner, ms, s.capArg}).ToArray()
	if err != nil {
		// An error reply can follow partial writes, and an unanswered script may have run: release.
		s.cleanup(ctx, owner, stageAcquire)
		if luakit.IsUncertain(err) {
			return nil, fmt.Errorf("%w: acquire: %w", ErrUncertain, err)
		}
		return nil, fmt.Errorf("semaphore: acquire: %w", err)
	}
	status, active, err := decodePair(arr)
	if err != nil {
		s.cleanup(ctx, owner, stageAcquire)
		return nil, fmt.Errorf("semaphore: acquire: %w", err)
	}
	switch status {
	case 1:
		if ttl > 0 && !time.Now().Before(start.Add(ttl)) {
			s.cleanup(ctx, owner, stageAcquire)
			return nil, ErrLateReply
		}
		return newPermit(s, owner, ttl, start), nil
	case 0:
		return nil, ErrNotAcquired
	case -1:
		return nil, &CapacityMismatchError{Stored: active, Requested: s.capacity}
	}
	s.cleanup(ctx, owner, stageAcquire)
	return nil, fmt.Errorf("semaphore: acquire: unexpected status %d", status)
}

// decodePair decodes a {status, value} script reply; value is an integer or a decimal string.
func decodePair(arr []rueidis.RedisMessage) (int64, int64, error) {
	if len(arr) != 2 {
		return 0, 0, fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return 0, 0, fmt.Errorf("status: %w", err)
	}
	v, err := luakit.Int64(arr[1])
	if err != nil {
		return 0, 0, fmt.Errorf("value: %w", err)
	}
	return status, v, nil
}
