// Package lease provides named leases on Redis and Valkey through a rueidis client: each lease is one
// field of a hash, with its own expiry, so one hash key holds many independent leases
// ("coordination:leases" → "worker:42", "worker:43", ...).
//
// # Model
//
// A lease is the field of a hash whose value is a random 128-bit owner token and whose expiry is set
// per field with HPEXPIRE. Acquiring runs one Lua script that, when the field is absent (or expired),
// writes the token and the field's expiry; renewal, verification and release are one script each and
// check the owner token, so an owner whose lease expired can never touch a replacement lease, and one
// owner can never touch another field. Expiry uses the server's clock.
//
//	leases, _ := lease.New(client)
//	l, err := leases.TryAcquire(ctx, "coordination:leases", "worker:42", 30*time.Second)
//	if errors.Is(err, lease.ErrNotAcquired) { return }
//	defer l.Release(context.WithoutCancel(ctx))
//	_ = l.KeepAlive(ctx)  // or renew with l.Extend before the estimate elapses
//	work(l.Context())     // cancelled when the lease's local estimate elapses or ownership is lost
//
// A [Lease] is an owner-token handle: its estimate, renewal, keep-alive, verification, release,
// ordering and errors follow the contract in package github.com/coordkit/coordkit/luakit/ownership.
// In short: Done and Context are fixed for the lease's life, so a lease whose estimate elapsed is
// never revived (take a new one); an uncertain renewal keeps the previous estimate; a renewal whose
// reply arrives after the estimate elapsed is not a success and the field is given back.
//
// [Leases.TryAcquire] returns at once. [Leases.Acquire] waits without polling, on the hash key: it
// wakes when the hash key is invalidated (RESP3 client-side caching, on a client built by
// [luakit.NewTrackedClient] or with [WithTracker]) and at the held field's HPTTL deadline in every
// case. Waiters watch the whole hash, so a change to any field wakes every waiter on that hash for
// another attempt. [Leases.Inspect] lists the fields of a hash with their remaining life, never their
// owner tokens.
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
//   - Late ([ErrLateReply]) and uncertain ([ErrUncertain]) acquisitions are never reported as acquired;
//     the owner-checked release that follows is sent on the same connection behind the acquisition
//     (standalone clients), bounded by [WithCleanupTimeout], even when the caller's context ended.
//   - Extend and Release run one at a time: a Release waits for an in-flight Extend within its own
//     ctx (it does not wait for a Verify). When ctx ends first, Release returns an error wrapping
//     ctx.Err(), sends nothing and leaves the lease vouching: call Release again (or Close, bounded by
//     the cleanup timeout) to remove it. It is deliberately not retried past ctx: ctx is the caller's
//     bound on the call, and a release sent after the call returned would race the caller's next
//     decision.
//
// # Non-guarantees
//
//   - No fencing token: a paused or partitioned process can act after its lease expired. Use the lock
//     module when the protected resource can check a fencing token.
//   - Mutual exclusion relies on the server's clock and on the TTL outlasting the protected work's pauses.
//   - Asynchronous replication can lose a just-written field on failover (another owner may then acquire
//     it); a key-level expiry, DEL, FLUSHALL or eviction of the hash removes every lease in it. Reserve the
//     hash for this package and run on a non-evicting deployment.
//   - Lease.Verify and [Leases.Inspect] describe one instant; they cannot vouch for a later moment.
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
// [Leases] and [Lease] are safe for concurrent use. A Lease owns at most one timer for its local
// estimate and no goroutine: while Lease.KeepAlive runs, its renewals are sent by the keep-alive
// scheduler every Lease of the Leases shares (luakit/ownership); Release stops them and waits until
// none is in flight.
package lease
