// Package semaphore provides counting semaphores with expiring permits on Redis and Valkey through a
// rueidis client.
//
// # Model
//
// A semaphore is one sorted set. Each permit is a member, a random 128-bit owner token, scored by its
// expiry in milliseconds of server time (TIME inside the script); a permit without expiry ([NoExpiry])
// is scored +inf. The capacity is stored in the same key as the reserved member "#capacity" scored
// -capacity, so that the semaphore stays one key (Cluster-safe with no hash tag) and pruning, which
// removes the score range [0, now], never touches it. Every operation is one Lua script that first
// prunes expired permits, so no cleanup worker is needed. The key's own expiry follows its latest
// permit (none while a permit has no expiry), and the key is deleted when its last permit is released,
// so an idle semaphore leaves nothing behind.
//
//	sem, _ := semaphore.New(client, "batch:42:permits", 4)
//	permit, err := sem.TryAcquire(ctx, 30*time.Second)
//	if errors.Is(err, semaphore.ErrNotAcquired) { return }
//	defer permit.Close()
//	run(permit.Context())
//
// TryAcquire returns at once: acquisition does not queue, poll or promise fairness. [Permit.Extend]
// resets a permit's expiry (renewing it or changing its lifetime), [Permit.Verify] checks it,
// [Permit.Release] removes it and reports a [ReleaseOutcome], [Permit.Close] releases it on a
// best-effort basis. Every operation is guarded by the owner token, so an owner whose permit expired
// can never renew or release a permit acquired after it.
//
// # Capacity
//
// Every contender on a key must use the same capacity. While any permit is active, an acquisition with
// a different capacity fails with a [*CapacityMismatchError] ([ErrCapacityMismatch]) and writes nothing
// (beyond pruning). With no active permit, the acquiring Semaphore's capacity is adopted. Changing the
// capacity therefore means draining the semaphore first (stop acquiring with the old capacity, let the
// permits end). Lowering the capacity never revokes permits: no operation ever removes another owner's
// unexpired permit, Extend, Verify and Release never check the capacity, and if more permits than the
// stored capacity are active (after a failover rolled back a release, say) they are kept while new
// acquisitions fail until the count is below the capacity.
//
// # Failure behaviour
//
//	Operation    On failure or cancellation
//	Verify       Returns the error and leaves the permit held; retry it. It prunes, so it runs on the
//	             primary and needs write permission.
//	Extend       Not yet sent (invalid ttl, ctx ended while waiting for another Extend/Release on the
//	             handle): no change. Once sent: the permit is surrendered (IsReleased true, Remaining
//	             zero, Err ErrSurrendered, later Extends return false) and an owner-token release bounded
//	             by the cleanup timeout (1s) is tried, then retried in the background. The permit's
//	             lifetime on the server is unknown: acquire a new permit.
//	Release      One owner-token release bounded by ctx and the cleanup timeout. If unconfirmed
//	             (ErrUncertain), ownership is uncertain; use the handle only to retry Release.
//	Close        Never returns an error (always nil); waits about one second for the release, then
//	             retries in the background with jittered backoff for up to a minute.
//	TryAcquire   On an uncertain or late outcome, or an error reply (other than a capacity mismatch,
//	             which writes nothing) that may follow partial writes, an owner-token release is sent
//	             before returning, and retried in the background; a finite expiry is the fallback.
//
// A background cleanup that cannot be confirmed within the retry window ([WithCleanupRetryWindow],
// default one minute), that meets a terminal error, or that [Semaphore.Shutdown] stops, is abandoned:
// the OpenTelemetry counter [MetricCleanupAbandoned] ("coordkit.coordination.cleanup.abandoned",
// attributes stage and reason, never keys or tokens) is incremented and a warning is logged through
// [WithLogger]. Call [Semaphore.Shutdown] before exiting (or closing the client) to wait for, or stop,
// those goroutines.
//
// # Guarantees
//
//   - At most capacity permits are granted while the capacity is unchanged, within one retained Redis
//     history and on the server's clock. (After a lowering, holders above the new capacity stay until
//     they end.)
//   - A failed acquisition (no permit, capacity mismatch) writes nothing but the pruning of expired
//     permits. Invalid input (empty key, capacity outside [1, 2^53], a negative or sub-millisecond TTL)
//     fails before any I/O.
//   - The handle's local estimate ([Permit.Remaining], [Permit.Deadline], [Permit.Done]) is measured
//     from before the request was sent, so on a sane clock it ends no later than the server's permit.
//     A grant that arrives after the estimate elapsed is [ErrLateReply], not acquired.
//   - Outcomes that cannot be known (timeout, cancellation or disconnect after sending) are reported as
//     [ErrUncertain], never as success.
//   - Keys and owner tokens are binary-safe; a key prefix ([WithKeyPrefix]) applies to the key.
//
// # Non-guarantees
//
//   - Asynchronous replication: a failover or a restore can roll back permit state (lose grants,
//     releases or renewals), so more than capacity holders can briefly exist. This is not
//     consensus-safe.
//   - Expiry follows the clock of the server that runs the script; after a failover a replica with a
//     skewed clock expires permits early or late.
//   - A delayed acquisition (uncertain outcome) can reach the server after its cleanup release, for
//     example on another connection; that permit then lives until its TTL.
//   - Prefer a finite expiry: a permit without expiry whose holder crashes (or whose cleanup is
//     abandoned) consumes capacity, and blocks capacity changes, until removed. To recover, stop every
//     holder and delete the key, or remove the stale members scored +inf
//     (ZREMRANGEBYSCORE key +inf +inf); never remove the "#capacity" member while permits are active.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster (one key: no hash tag needed). The
// scripts write after calling TIME, which needs effects replication (lua-replicate-commands): the
// default since Redis 5 and the only mode since Redis 7 and in Valkey. Scripts run through EVALSHA
// with an EVAL fallback (NOSCRIPT after a restart or SCRIPT FLUSH is handled). Verify, Extend and
// Release prune, so all of them need write permission on the key.
//
// # Concurrency
//
// [Semaphore] and [Permit] are safe for concurrent use. A Permit owns no goroutine; a Semaphore runs
// goroutines only for background cleanup retries, which [Semaphore.Shutdown] waits for or stops.
package semaphore
