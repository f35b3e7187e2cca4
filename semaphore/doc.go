// Package semaphore provides counting semaphores with expiring permits on Redis and Valkey through a
// rueidis client.
//
// # Model
//
// A semaphore is one sorted set. Each permit is a member, a random 128-bit owner token, scored by its
// expiry in milliseconds of server time (TIME inside the script); a permit without expiry
// ([Semaphore.TryAcquireNoExpiry]) is scored +inf. The capacity is stored in the same key as the reserved member "#capacity" scored
// -capacity, so that the semaphore stays one key (Cluster-safe with no hash tag) and pruning, which
// removes the score range [0, now], never touches it. Every operation is one Lua script that first
// prunes expired permits, so no cleanup worker is needed. The key's own expiry follows its latest
// permit (none while a permit has no expiry), and the key is deleted when its last permit is released,
// so an idle semaphore leaves nothing behind.
// A permit of weight n ([Semaphore.TryAcquireN], [Semaphore.AcquireN]) holds n units of the
// capacity as n members (the owner token, then "<owner>:2" ... "<owner>:n") scored alike.
//
//	sem, _ := semaphore.New(client, "batch:42:permits", 4)
//	permit, err := sem.Acquire(ctx, 30*time.Second) // or TryAcquire: one attempt, ErrNotAcquired
//	if err != nil { return err }
//	defer permit.Close()   // and, when done with the semaphore: sem.Close(ctx)
//	run(permit.Context())
//
// [Semaphore.TryAcquire] returns at once. [Semaphore.Acquire] waits while the semaphore is full: it
// sleeps until the semaphore key changes (a permit released, added, renewed or pruned; RESP3
// client-side-caching invalidations, see [WithTracker]) or the earliest active permit expires, then
// tries again. Neither queues nor promises fairness.
//
// # Ownership
//
// A [Permit] is an owner-token handle and behaves as the contract in package
// github.com/coordkit/coordkit/luakit/ownership says (Extend, KeepAlive, Verify, Release, Done,
// Context, Err, Remaining; the shared errors such as [ErrLost] and [ErrUncertain]). What differs:
//
//   - A permit may have no expiry, asked for by name: [Semaphore.TryAcquireNoExpiry],
//     [Semaphore.AcquireNoExpiry], [Permit.ExtendNoExpiry] ([Permit.ExtendTTL], at least 1ms, gives
//     it a TTL again). Permit.Remaining is then [Forever], its TTL 0, Extend keeps it so and KeepAlive
//     does nothing. A TTL of 0 is [ErrInvalidTTL], as in every Coordkit module.
//   - Extend, ExtendTTL, Verify and Release never check the capacity; Verify prunes expired permits, so
//     it runs on the primary and needs write permission.
//   - [Permit.Close] is a best-effort Release that returns its first attempt's error (nil when
//     answered) and whose unanswered release is also retried in the background, with jittered backoff,
//     as is the owner-token release sent behind an uncertain, failed or late acquisition (on the same
//     connection, bounded by the cleanup timeout even if ctx is cancelled; the TTL is the fallback if
//     it never lands). A Close that a hook rejected sends nothing and starts no retry. A retry that
//     is answered settles the permit. A background cleanup that cannot be confirmed within the
//     retry window ([WithCleanupRetryWindow], default one minute), that meets a terminal error, or that
//     [Semaphore.Close] stops, is abandoned: the OpenTelemetry counter [MetricCleanupAbandoned] is
//     incremented and a warning is logged.
//
// # Lifecycle
//
// A Semaphore runs background work (those cleanup retries), so it has [Semaphore.Close]: later
// acquisitions fail with [ErrClosed] (luakit's value), and Close waits for the retries until its ctx
// ends, then stops them and returns an error wrapping ctx.Err(). It is idempotent and never closes
// the client. Call it before exiting (or closing the client); held permits stay usable after it.
//
// # Capacity
//
// Every contender on a key must use the same capacity. While any permit is active, an acquisition with
// a different capacity fails with a [*CapacityMismatchError] ([ErrCapacityMismatch]) and writes nothing
// (beyond pruning). With no active permit, the acquiring Semaphore's capacity is adopted. Changing the
// capacity therefore means draining the semaphore first. Lowering the capacity never revokes permits:
// no operation ever removes another owner's unexpired permit, and if more permits than the stored
// capacity are active (after a failover rolled back a release, say) they are kept while new
// acquisitions fail until the count is below the capacity.
//
// # Guarantees
//
//   - At most capacity permits are granted while the capacity is unchanged, within one retained Redis
//     history and on the server's clock.
//   - A failed acquisition (no permit, capacity mismatch) writes nothing but the pruning of expired
//     permits. Invalid input (empty key, capacity outside [1, 2^53], a negative or sub-millisecond TTL)
//     fails before any I/O.
//   - Keys and owner tokens are binary-safe; a key prefix ([WithKeyPrefix]) applies to the key.
//
// # Non-guarantees
//
//   - Asynchronous replication: a failover or a restore can roll back permit state, so more than
//     capacity holders can briefly exist. This is not consensus-safe.
//   - Expiry follows the clock of the server that runs the script.
//   - Prefer a finite expiry: a permit without expiry whose holder crashes (or whose cleanup is
//     abandoned) consumes capacity, and blocks capacity changes, until removed. To recover, stop every
//     holder and delete the key, or remove the stale members scored +inf
//     (ZREMRANGEBYSCORE key +inf +inf); never remove the "#capacity" member while permits are active.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster (one key: no hash tag needed). The
// scripts write after calling TIME, which needs effects replication (the only mode since Redis 7 and in
// Valkey). Scripts run through EVALSHA with an EVAL fallback. Acquire wakes on releases only on a RESP3
// client with client-side caching whose tracker it knows ([luakit.NewTrackedClient] or [WithTracker]);
// otherwise it wakes when the earliest permit expires (once a second while none expires).
//
// # Concurrency
//
// [Semaphore] and [Permit] are safe for concurrent use. A Permit owns no goroutine: the renewals of
// every Permit.KeepAlive of a Semaphore are sent by one keep-alive scheduler (one timer goroutine
// while any permit keeps alive, at most 64 renewals in flight; see luakit/ownership). A Semaphore runs
// other goroutines only for background cleanup retries, which [Semaphore.Close] waits for or stops.
package semaphore
