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
//	locks, _ := rwlock.New(client) // client from luakit.NewTrackedClient: waiters wake on releases
//	lease, err := locks.AcquireRead(ctx, "account:42:rw", 30*time.Second)
//	if err != nil { return err } // ctx ended while a writer held it, or a server error
//	defer lease.Close()
//	if err := lease.KeepAlive(ctx); err != nil { return err }
//	read(lease.Context())
//
// [Locker.TryAcquireRead] and [Locker.TryAcquireWrite] make one attempt and return [ErrNotAcquired] on
// contention. [Locker.AcquireRead] and [Locker.AcquireWrite] wait: they sleep until the key changes
// (client-side-caching invalidations) or the conflicting entries expire, never on a fixed period.
//
// A [Lease] is an owner-token handle: see the contract in package
// github.com/coordkit/coordkit/luakit/ownership for what Extend, KeepAlive, Verify, Release, Done,
// Context, Err, Remaining and Deadline do in every situation. What differs here is stated below.
//
// # Writer starvation
//
// There is no queue and no fairness. Readers keep being admitted while a writer waits, so overlapping
// readers can keep a waiting writer out indefinitely: AcquireWrite retries each time the key changes
// and succeeds only at an instant when no reader holds it. Bound writers' waits with ctx, keep read
// leases short, or use a plain lock when writers must progress.
//
// # Guarantees
//
//   - Within one retained Redis history, at every server instant the unexpired entries of a key are
//     either readers only, or exactly one writer.
//   - Renewal, verification and release touch only this holder's entry; an expired holder never
//     touches a replacement.
//   - The lease's local estimate is measured from before the request was sent, so on a sane clock it
//     ends no later than the server's entry; a grant that arrives after it elapsed is [ErrLateReply].
//   - Outcomes that cannot be known are [ErrUncertain], never success. After an uncertain or late
//     acquisition one owner-checked release is sent, ordered behind it and bounded by the cleanup
//     timeout; the acquisition is never replayed. If that release is lost, the entry expires after
//     the requested TTL.
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
// expiry is not needed. Waking waiters on releases needs a tracked client: RESP3 with client-side
// caching (the rueidis default) and a tracker ([luakit.NewTrackedClient] or [WithTracker]). Scripts run by EVALSHA with an EVAL fallback, so a flushed script cache is harmless. Cost: O(log N +
// E) per operation for N holders and E expired entries pruned; a waiting attempt adds one cached PTTL
// read.
//
// # Concurrency
//
// [Locker] and [Lease] are safe for concurrent use by multiple goroutines. A Locker owns no goroutines;
// a Lease owns one only while [Lease.KeepAlive] runs (Release and Close stop it and wait for it).
package rwlock
