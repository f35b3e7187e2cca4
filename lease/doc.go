// Package lease provides named leases on Redis and Valkey through a rueidis client: each lease is one
// field of a hash, with its own expiry, so one hash key holds many independent leases
// ("coordination:leases" → "worker:42", "worker:43", ...).
//
// # Model
//
// A lease is the field of a hash whose value is a random 128-bit owner token and whose expiry is set
// per field with HPEXPIRE. Acquiring runs one Lua script that, when the field is absent (or expired),
// writes the token and the field's expiry; renewal ([Lease.Extend]), verification and release are one
// script each and check the owner token, so an owner whose lease expired can never touch a replacement
// lease, and one owner can never touch another field. Expiry uses the server's clock.
//
//	leases, _ := lease.New(client)
//	l, err := leases.TryAcquire(ctx, "coordination:leases", "worker:42", 30*time.Second)
//	if errors.Is(err, lease.ErrNotAcquired) { return }
//	defer l.Release(context.WithoutCancel(ctx))
//	work(l.Context()) // cancelled when the lease's local estimate elapses or ownership is lost
//
// [Leases.TryAcquire] returns at once. [Leases.Acquire] waits without polling: with [WithTracker] on a
// RESP3 client with client-side caching (the rueidis default) it wakes when the hash key is invalidated,
// and at the held field's HPTTL deadline in every case. Waiters watch the whole hash, so a change to any
// field wakes every waiter on that hash for another attempt. [Leases.Holders] lists the fields of a hash
// with their remaining life, never their owner tokens.
//
// There is no keep-alive: renew with [Lease.Extend] before the estimate elapses. Unlike a fenced lock,
// a hash-field renewal checks the owner field in Redis, so it can succeed after the local estimate
// elapsed while the field still exists; the handle then starts a new period.
//
// # Guarantees
//
//   - At most one unexpired owner per field, within one retained Redis history; fields are independent.
//   - Hash keys and fields are binary-safe; the key prefix ([WithKeyPrefix]) applies to the hash key only.
//   - A failed acquisition writes nothing: a held field ([ErrNotAcquired]), a hash with a key-level
//     expiry ([ErrExpiringHash]: it would delete every lease at once), a key of another type (WRONGTYPE),
//     a server without hash-field expiry (an error wrapping luakit.ErrUnsupported that names the feature
//     and Redis 7.4 / Valkey 9.0, found by probing the HPEXPIRE command once per [Leases], not by version
//     string), and an empty hash key or field or a TTL under 1ms (rejected before any I/O).
//   - The handle's local estimate ([Lease.Remaining], [Lease.Deadline], [Lease.Done], [Lease.Context]) is
//     measured from before the request was sent, so on a sane clock it ends no later than the server's
//     field. A grant that arrives after the estimate elapsed is not reported as acquired
//     ([ErrLateReply]; an owner-checked release is attempted).
//   - Outcomes that cannot be known (timeout, cancellation or disconnect after sending) are reported as
//     [ErrUncertain], never as success. After an uncertain acquisition an owner-checked release, bounded
//     by [WithCleanupTimeout], is attempted even when the caller's context ended; the command is never
//     replayed. After an uncertain renewal or release the handle fails closed: it ends with ErrUncertain
//     (or [ErrReleased]) and Extend returns false from then on, because the earlier renewal may still
//     run. An owner-checked [Lease.Release] can always be retried and settles ownership; create a new
//     lease only after the server reports this owner no longer holds the field.
//
// # Non-guarantees
//
//   - No fencing token: a paused or partitioned process can act after its lease expired. Use the lock
//     module when the protected resource can check a fencing token.
//   - Mutual exclusion relies on the server's clock and on the TTL outlasting the protected work's pauses.
//   - Asynchronous replication can lose a just-written field on failover (another owner may then acquire
//     it); a key-level expiry, DEL, FLUSHALL or eviction of the hash removes every lease in it. Reserve the
//     hash for this package and run on a non-evicting deployment.
//   - [Lease.Verify] and [Leases.Holders] describe one instant; they cannot vouch for a later moment.
//   - Acquire is not fair: waiters race on every wake-up.
//
// # Servers
//
// Redis 7.4 and later, Valkey 9.0 and later, standalone or Cluster (each lease touches one key). Redis
// 7.0–7.2 and Valkey 8 lack hash-field expiry; every call fails before writing. RESP2 clients work;
// waiting then relies on the HPTTL deadline.
//
// # Concurrency
//
// [Leases] and [Lease] are safe for concurrent use and own no goroutines; a Lease uses one timer for its
// local estimate, stopped when the handle ends.
package lease
