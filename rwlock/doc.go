// Package rwlock provides read-write leases on Redis and Valkey through a rueidis client: any number of
// shared read leases, or one exclusive write lease, on one key, each holder with its own expiry.
//
// # Model
//
// A lock is one key: a sorted set whose members are holder entries, "r:<owner>" for a reader and
// "w:<owner>" for the writer, each scored by its expiry in server-time milliseconds (the scripts read
// TIME; client clocks never matter to the server state). Every operation is one Lua script that first
// removes expired entries. A read lease is granted unless an unexpired writer exists; a write lease only
// when no unexpired entry exists. Each entry's expiry is its own: renewing one reader never extends
// another. The key's PEXPIRE follows its latest entry, so an abandoned key disappears by itself.
//
// The owner token is random (128 bits) and part of the entry, so renew, verify and release touch only
// this holder's entry: an expired holder can never renew or remove a replacement.
//
//	locks, _ := rwlock.New(client)
//	lease, err := locks.TryAcquireRead(ctx, "account:42:rw", 30*time.Second)
//	if errors.Is(err, rwlock.ErrNotAcquired) { return } // a writer holds it
//	if err != nil { return }
//	defer lease.Close()
//	read(lease.Context())
//
// Acquisition is try-only: [Locker.TryAcquireRead] and [Locker.TryAcquireWrite] return at once on
// contention; they do not queue, poll or promise fairness.
//
// # Writer starvation
//
// Overlapping readers keep being admitted while a writer waits, so a steady stream of readers can starve
// writers indefinitely. Retry writes with bounded backoff and give up (see the Locker.TryAcquireWrite
// example: 50ms doubling to 2s), keep read leases short, or use a plain lock when writers must progress.
//
// # Guarantees
//
//   - Within one retained Redis history, at every server instant the unexpired entries of a key are
//     either readers only, or exactly one writer.
//   - Renewal ([Lease.Extend]) succeeds only while the entry exists unexpired. A failed renewal (entry
//     gone) or an uncertain one (no reply read) ends the handle with [ErrLost]: it fails closed, because
//     an uncertain renewal may not have run. Later Extend calls return false without I/O.
//   - Verification ([Lease.Verify]) holds at one instant only, and never changes the handle, so a
//     failed verification leaves Release able to remove the entry.
//   - The handle's local estimate ([Lease.Remaining], [Lease.Deadline], [Lease.Done]) is measured from
//     before the request was sent, so on a sane clock it ends no later than the server's entry. A grant
//     that arrives after it elapsed is [ErrLateReply], not acquired.
//   - Outcomes that cannot be known (timeout, cancellation or disconnect after sending) are reported as
//     [ErrUncertain], never as success. After an uncertain or late acquisition an owner-checked release,
//     bounded by the cleanup timeout, is sent even if the caller's context is cancelled; the acquisition
//     is never replayed. If that release is lost, the entry expires after the requested TTL.
//   - Invalid input (nil client, empty key, TTL under 1ms, a bad option) fails before any I/O.
//
// # Non-guarantees
//
//   - No fencing token: a paused or partitioned holder can keep working after its entry expired. Stop
//     protected work when [Lease.Done] closes, and keep leases well above expected pauses.
//   - Asynchronous replication: a failover can promote a replica that missed recent grants or releases,
//     restoring older lock state. This is not consensus-safe; use a consensus system (etcd, ZooKeeper)
//     when a violation is unacceptable.
//   - Expiry relies on the server's clock; a clock jump on the server shortens or lengthens every entry.
//   - No fairness and no queue (see Writer starvation). [Lease.Close] is best-effort: an entry it misses
//     blocks conflicting holders until it expires.
//   - Use a key dedicated to this package: a key holding another type fails with WRONGTYPE, and foreign
//     members in the sorted set break the invariant.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster. Each lock is a single key, so Cluster
// needs no hash tags, and client key prefixes ([WithKeyPrefix]) and binary keys work. Hash-field
// expiry is not needed. Scripts run by EVALSHA with an EVAL fallback, so a flushed script cache is
// harmless. Cost: O(log N + E) per operation for N holders and E expired entries pruned.
//
// # Concurrency
//
// [Locker] and [Lease] are safe for concurrent use by multiple goroutines and own no goroutines (a
// Lease's local-expiry timer runs only when it fires).
package rwlock
