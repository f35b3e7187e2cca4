// Package ratelimit provides distributed rate limiters on Redis and Valkey through a rueidis client:
// fixed window, segmented sliding window, token bucket, GCRA, and atomic composites of the first
// three, with a local wait queue, runtime settings updates that keep usage, a shared deny list,
// OpenTelemetry admission counters, and (in [github.com/coordkit/coordkit/ratelimit/ratelimithttp])
// net/http middleware with the IETF RateLimit headers.
//
// # Model
//
// A [Limiter] enforces one [Policy] on one server key. Every decision is one Lua script (one round
// trip: EVALSHA, plus one EVAL after a NOSCRIPT reply when the server's script cache was emptied)
// that reads the server's clock (TIME) and admits all n permits or none, atomically across every
// process sharing the key. Each limiter uses exactly one key, so it works on Cluster without hash
// tags; keys are binary-safe and take the [WithKeyPrefix] prefix ([Limiter.Key] and the deny list's Key
// return them without it).
//
//	limiter, err := ratelimit.New(client, "limits:checkout",
//		ratelimit.GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond})
//	if err != nil {
//		return err
//	}
//	defer limiter.Close(ctx)
//	res, err := limiter.Allow(ctx)
//	switch {
//	case err != nil:
//		return err // the server's answer is unknown: fail open or closed, your choice
//	case !res.Allowed && res.RetryAfter > 0:
//		// try again no earlier than res.RetryAfter; others may take the capacity first
//	case !res.Allowed:
//		// can never succeed (n above the capacity) or denied (res.Reason)
//	}
//
// The words follow golang.org/x/time/rate where they fit: [Limiter.AllowN] decides now without
// waiting and reports a rejection as a Result (Allowed false, no error); [Limiter.WaitN] waits until
// admitted and, like rate.Limiter.Wait, returns an error whenever it returns without admission
// ([ErrExceedsCapacity] at once for n above the capacity, [ErrDenied], [ErrQueueFull], or the
// context's error; a deadline before the server-computed admission time fails at once). Without
// [WithQueue] WaitN sleeps each rejection's RetryAfter and decides again (never polling); with a
// queue it waits in the local queue for the same server-computed time.
// n = 0 is a probe: it reports whether one permit is available and writes nothing. A negative n is
// [ErrNegativePermits]; n above the policy's capacity is a rejection without RetryAfter, decided
// locally without a capacity script (no error; a bound deny list is still checked first). Permits
// are consumptive: nothing returns them except [Limiter.Refund] / [Keyed.Refund] (one script; GCRA,
// fixed windows, token buckets and composites of the latter two: the exact inverse of an admission,
// never above the capacity; a sliding window is [ErrRefundUnsupported], because the segment a
// permit was charged to is unknown). [Limiter.Reset] / [Keyed.Reset] delete a key's state (one
// script), and [Limiter.Inspect] / [Keyed.Inspect] read it without writing (one read-only script).
// [Keyed] applies one policy to many keys (per tenant, per client IP) without a Go object per key.
//
// # Algorithms
//
//   - [FixedWindow]: at most Limit permits per window; a window starts at the first successful
//     acquisition after the previous one ended. Stored: the count and the window's end; the key
//     expires when the window ends.
//   - [SlidingWindow]: at most Limit permits in any rolling window, counted per segment. A permit is
//     charged to the segment ending at or after its arrival and is released at that segment's end plus the
//     window: never early, at most one segment late. Stored: one count per active segment; the key
//     expires when the last segment does (its end plus the window).
//   - [TokenBucket]: starts full; TokensPerPeriod tokens are added at the end of each Period, up to
//     Limit; elapsed partial periods are kept. Stored: the token count and the start of the current
//     refill period; the key expires when the bucket is full again.
//   - [GCRA]: Burst permits at once, then one per EmissionInterval. Stored: the theoretical arrival
//     time only; the key expires once the full burst is available again. Rejections and probes leave
//     it unchanged.
//   - [Composite]: 1 to 32 components (fixed, sliding, token bucket) in one hash at one key with a
//     configuration signature. A request is admitted only if every component admits it and then
//     consumes from every component; RetryAfter is the maximum over components for the whole batch.
//     A stored signature that differs from a [Limiter]'s is [ErrConfigMismatch] with nothing
//     consumed ([Keyed] converts the key instead; see below).
//
// Every key expires once every component could be back at full capacity. Precision: every script
// computes in whole microseconds from the server's TIME (seconds and microseconds), so a 1.5ms or
// 0.3ms emission interval, a 400µs refill period or 2500 permits a second on one key are enforced
// exactly. Durations are rounded up to whole microseconds (Policy reports the rounded values, and a
// sliding window's Segments 0 as DefaultSegments), where
// other Coordkit modules truncate TTLs: a window, period or emission interval is a lower bound on
// how long permits stay counted, and the key's expiry derives from it, so rounding down would let
// permits come back early. Key expiry (PEXPIREAT) is in whole ms, rounded up. Settings out of range
// (a duration below 1µs or above [MaxSpan], a derived span above MaxSpan) are [ErrInvalidPolicy]
// from the constructor, before any I/O.
//
// Standalone layouts differ from the composite's and record no signature: dedicate
// each key to one limiter kind and one configuration (or use the update protocol below).
//
// # Results
//
// [Result] carries Allowed, Reason ([ReasonCapacity] or [ReasonDenyList]), Remaining (from this reply,
// the minimum over components), Limit, RetryAfter (for all n permits, positive only when a retry can
// succeed), Reset (until full capacity), the index of the most limiting component, and At, the
// server time of the decision.
//
// # Waiting
//
// Without a queue, [Limiter.WaitN] sleeps each rejection's server-computed RetryAfter with a timer
// and decides again, until admitted, ctx ends (an error at once when the admission time is after
// ctx's deadline) or the request can never be admitted ([ErrExceedsCapacity]: n above the capacity,
// or above the Limit of the settings a decision applied; [ErrDenied]). A WaitN
// that returns without admission always returns an error; AllowN never waits and reports the same
// situations as a rejected Result.
//
// With [WithQueue](limit, order), [Limiter.WaitN] queues a request that cannot be admitted now when
// it fits: up to limit permits wait, served [OldestFirst] (a full queue rejects new requests) or
// [NewestFirst] (a full queue evicts the oldest waiters). A waiter sleeps until the RetryAfter the
// server computed, then makes one more atomic attempt: no polling. ctx cancellation removes a waiter
// (its error is ctx's, also wrapping [ErrUncertain] when its retry was already sent); [Limiter.Close]
// fails waiters with [ErrClosed]. The queue is local: other processes, and new local callers between
// retries, can take the permits first.
//
// # Updating settings at runtime
//
// [Limiter.Update] changes the settings of a live limiter, keeping the key, the algorithm and (for
// composites) the number and algorithm of every component. New attempts wait, attempts in flight
// finish, then [Migrate] converts the stored usage in one script and the new settings are published
// together; the queue wakes at once and waiters retry under the new settings (a waiter above the new
// capacity fails with [ErrExceedsCapacity]; a waiter whose attempt was in flight keeps that attempt's
// admission, or retries at once when it was rejected). Identical settings are a no-op. [Adopt] changes only the
// local settings, with no I/O. The migration rules:
//
//	Fixed window    Keep the count and the deadline. The new capacity applies at once, the new width
//	                from the next window. A capacity below the used count denies until the deadline.
//	Sliding window  Keep the segments active under both the old and the new window; the new window
//	                sets their remaining lifetime; new requests use the new segmentation. Expired
//	                history is never recovered. A larger old segment can keep delaying expiry after
//	                the segment width shrinks.
//	Token bucket    Settle complete refill periods at the old rate, clamp to the new capacity, start a
//	                new refill period at the migration time (the old partial period is dropped). A
//	                larger capacity is refilled, not granted.
//	GCRA            Keep the outstanding debt TAT − now (partial permits too), rescaled to
//	                debt × new T / old T (T the emission interval) and rounded up to microseconds.
//	                Debt above the new burst must drain first.
//	                Debt above MaxSpan is ErrDebtOverflow (nothing written).
//	Composite       Each component by its rule, and the new signature, atomically.
//
// An absent or expired key stays absent. A composite signature mismatch, a GCRA debt overflow or a
// key holding foreign data ([ErrForeignData]) is a validation rejection: nothing was written and the
// limiter keeps its settings and queue. Any other failure after the migration script was sent closes
// the limiter and fails its waiters, because the server may already have changed: reconcile before
// building a replacement, do not blindly retry.
//
// Ratelimit does not distribute settings. When several processes share a key: pause acquisitions
// everywhere (drain local queues), let exactly one process call Update with Migrate, have every other
// process call Update with the same policy and Adopt (or construct new limiters with it), then resume.
// Migrating the same change in several processes applies token refills and GCRA rescaling again, so
// the mode has no default: the zero [UpdateMode] is invalid.
//
// # Updating the settings of a Keyed
//
// [Keyed.SetPolicy] cannot visit every key, so a [Keyed] converts keys lazily: every key it writes
// records the signature of its settings and a policy version ([WithPolicyVersion], raised by one by
// each SetPolicy; field "S" and "V" of a hash, "uTAT|version|g<burst>/<interval µs>" for GCRA). Each
// decision script compares the stored settings with the Keyed's and, in the same round trip:
//
//   - equal settings: decides as usual;
//   - stored with a higher version: decides by the stored settings (rebuilt from the signature) and
//     leaves them stored. A process still running older settings thus follows every key a newer
//     process has touched, and never converts it back, for as long as the key's state lives: once it
//     has expired (a key with nothing outstanding is absent), the next process to touch it writes it
//     under its own settings. When the stored settings' capacity (the reply's Limit) is below n, the
//     rejection has no RetryAfter and WaitN fails at once with [ErrExceedsCapacity] (nothing
//     consumed), as for n above the Keyed's own capacity;
//   - otherwise (a lower or equal version, or no signature): converts the state to the Keyed's
//     settings by the table above and decides on it; the conversion is stored with that decision,
//     admitted or not (a probe stores nothing). A composite's component list may change: the j-th
//     new component of a kind inherits the j-th stored component of that kind, a new component
//     without one starts at full capacity, and stored components without a counterpart are dropped.
//     State without a signature (written by a [Limiter]) is taken to hold the policy given to
//     [NewKeyed].
//
// A Keyed therefore never returns [ErrConfigMismatch], and ratelimithttp never fails closed on a
// key stored under other settings. In a rolling deploy, start the new processes with a higher
// WithPolicyVersion (or call SetPolicy everywhere): keys are converted once, on their first touch by a
// new process, and are then decided by the new settings whichever process touches them. Equal
// versions with different settings are last-writer-wins (each writer converts the key to its own
// settings; no error, but the key follows whoever touched it last): give every change a higher
// version. [Keyed.Refund] refunds nothing on a key still stored under other settings. A [Limiter]
// reads the GCRA values a Keyed stores (and writes them back without the signature).
//
// # Deny list
//
// A deny list (package [github.com/coordkit/coordkit/ratelimit/denylist], with its own options) is a
// server set of denied identities read through a bounded local cache shared by the whole process.
// [WithDenyList] binds a limiter to one identity ([WithKeyedDenyList] maps each key of a [Keyed] to
// one): a denied identity gets Result{Reason: ReasonDenyList} without touching the
// capacity key or entering the queue, including n = 0 probes; queued requests recheck before each
// retry. The membership check and the capacity decision are separate round trips (the two keys may
// live in different Cluster slots): this is an admission filter with bounded cache staleness, not an
// instant revocation.
//
// # Metrics
//
// Every limiter counts each completed AllowN / WaitN once, whatever n and however many queued
// retries it took, on the meter "github.com/coordkit/coordkit/ratelimit" ([WithMeterProvider]):
// coordkit.rate_limit.allowed and coordkit.rate_limit.blocked with reason=capacity or
// reason=deny_list. Probes count; errors and cancellations do not. Keys and identities are never
// attributes. The same outcomes feed [Limiter.Stats].
//
// # Guarantees and limits
//
//   - Admission is exact per key: the scripts run atomically on the server that owns the key, with
//     its clock. A replica promoted with a skewed clock shifts windows by the skew.
//   - A call whose command may have reached the server but whose reply was lost (timeout,
//     cancellation, broken connection) returns an error wrapping [ErrUncertain]: the permits may have
//     been consumed. Cancellation or Close racing an accepted script consumes permits without an
//     admitted Result.
//   - Redis replication is asynchronous: a failover can lose recent decisions and admit more than the
//     limit once. Eviction or deletion of a key resets its usage.
//   - Fixed windows use a Lua counter on every server version (the same single round trip Redis 8.8's
//     INCREX would give; no capability probe is needed).
//
// # Errors and lifecycle
//
// Errors follow Coordkit's shared vocabulary: [ErrUncertain], [ErrForeignData], [ErrClosed],
// [ErrNilClient] and [ErrInvalidConfig] are luakit's values, so one errors.Is check serves every
// module; every bad option or argument found before I/O matches ErrInvalidConfig (the package's
// [ErrInvalidPolicy], [ErrInvalidUpdate], [ErrNegativePermits] and [ErrEmptyIdentity] included).
// Every error carries the "ratelimit: " prefix and never a key or an identity. [Limiter], [Keyed]
// and a deny list run background work (the wait queue's goroutine; the idle-key sweep and the keys'
// queues; the shared deny-list reads), so each has Close(ctx), idempotent, after which calls fail
// with ErrClosed.
//
// Redis 7.0+ and Valkey 8+, standalone and Cluster; Sentinel works through rueidis' Sentinel client
// (untested here).
package ratelimit
