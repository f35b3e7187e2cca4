// Package lock provides fenced locks (leases with fencing tokens) on Redis and Valkey through a
// rueidis client.
//
// # Model
//
// A lock is two keys in one Cluster slot (see # Keys): the lease key, a string holding a random
// 128-bit owner token with a PX expiry, and the fence key, a persistent integer counter. Acquiring
// runs one Lua script that, when the lease is free, increments the counter and writes the lease; the
// new counter value is the fencing token. Renewal (Extend, KeepAlive), verification and release are
// one script or command each and check the owner token, so an expired owner can never touch a
// replacement lease. Expiry uses the server's clock.
//
//	lk, _ := lock.New(client)
//	lease, err := lk.TryAcquire(ctx, "invoice:42", 30*time.Second) // {invoice:42}:lease, {invoice:42}:fence
//	if errors.Is(err, lock.ErrNotAcquired) { return }
//	defer lease.Release(context.Background())
//	write(lease.Context(), lease.FencingToken()) // the resource rejects lower tokens
//
// TryAcquire returns at once. Acquire waits without polling: on a client from
// [github.com/coordkit/coordkit/luakit.NewTrackedClient] (RESP3 with client-side caching, the rueidis
// default) it wakes when the lease key is invalidated, with no option; in every case it wakes at the
// holder's PTTL deadline. On a client without working tracking it logs one warning per [Locker] and a
// release is noticed only at that deadline. Redis needs no notify-keyspace-events configuration.
//
// # Keys
//
// A lock is named: [Locker.TryAcquire] and [Locker.Acquire] take a name and derive both keys with a
// shared hash tag ([Keys]): the lease key "{" + name + "}:lease" and the fence key "{" + name +
// "}:fence", each after the [WithKeyPrefix] prefix, byte for byte. Redis Cluster hashes the bytes
// between a key's first '{' and the first '}' after it, when there is at least one, so both keys hash
// to one slot on every deployment: the tag is the name, or the name up to its first '}' when it holds
// one ("a{b}c" is tagged "a{b"), or the prefix's own tag when the prefix holds one ("{tenant}:" tags
// every key "tenant"). Two cases cannot be tagged this way: a name whose first byte is '}' ("{}" is no
// tag) and a prefix whose first braces are empty ("a{}"); their keys would land in two slots, so
// they are rejected on every client with a
// [*github.com/coordkit/coordkit/luakit.CrossSlotError], before any I/O.
//
// An existing layout keeps its own keys: [Locker.TryAcquireKeys] and [Locker.AcquireKeys] take the
// lease key and the fence key. Their slots are checked on a Cluster client only (a standalone server
// accepts any two keys), unless the Locker has [WithStrictSlots]: then a pair that a Cluster would
// reject with CROSSSLOT fails the same way on every client, so it shows in development, not after a
// move to Cluster. Every key error matches [ErrInvalidConfig].
//
// A [Lease] is Coordkit's shared owner-token handle: see the contract in package
// github.com/coordkit/coordkit/luakit/ownership for Extend, KeepAlive, Verify, Release, Done, Context
// and the errors (lock.ErrLost is luakit.ErrLost, and so on). This package states only what differs.
//
// # Guarantees
//
//   - At most one unexpired lease per lease key, within one retained Redis history.
//   - Fencing tokens are positive int64 values, strictly increasing across successive owners and equal
//     across renewals of one lease, exact above 2^53 (they cross the Lua boundary as decimal strings).
//     Tokens can have gaps when a reply is lost.
//   - A failed acquisition writes nothing: an expiring, negative, malformed or overflowing counter is
//     reported as a [*CounterError] with no lease created; an empty name or key, equal keys, keys in two
//     slots (see # Keys) or a TTL under 1ms is rejected before any I/O, with an error matching
//     [ErrInvalidConfig].
//   - The handle's local estimate (Remaining, Deadline) is measured from before the request was sent,
//     so on a sane clock it ends no later than the server's lease. A reply that arrives after the
//     estimate elapsed is not reported as acquired ([ErrLateReply]); Extend after it returns false
//     without contacting the server.
//   - Outcomes that cannot be known (timeout, cancellation or disconnect after sending) are reported as
//     [ErrUncertain], never as success.
//
// # Non-guarantees
//
//   - A lease is a plain string, so any value a foreign writer left at the lease key reads as another
//     owner's lease: TryAcquire returns [ErrNotAcquired] and Acquire waits until that key expires or
//     is deleted (telling it apart would cost a TYPE and GET per acquisition). Keep the lock's keys to
//     the lock. A foreign fence counter is reported ([CounterError], matching [ErrForeignData]).
//   - A fencing token does not stop a paused or partitioned process. The protected resource must
//     atomically reject writes whose token is lower than the highest it has accepted (for example a
//     conditional UPDATE ... WHERE last_token <= $token); only that makes the lock safe.
//   - Tokens are not globally monotonic. Asynchronous replication can lose the counter's last increments
//     on failover, and restoring a backup, deleting, expiring or evicting the counter can reissue or
//     lower tokens. Keep the counter's history: reserve both keys for this package, never delete or
//     expire the counter, and run on a non-evicting deployment with durability suited to the resource.
//     When tokens must stay monotonic across failover or rollback, use a consensus-backed fencing
//     authority (etcd, ZooKeeper, a database sequence).
//   - Mutual exclusion relies on the server's clock and on the lease TTL outlasting the protected work's
//     pauses; KeepAlive narrows but cannot close that window.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster (both keys in one slot: the one-name
// form sees to it; a key prefix containing a hash tag moves every key). RESP2 clients work; waiting then relies on the PTTL deadline.
// While the lock's slot migrates to another Cluster node, the servers refuse the acquisition (a
// two-key script) with TRYAGAIN whenever one of the keys is absent or has moved without the other: a
// free lock has no lease key, so that lasts the whole migration. Every call retries it within ctx for
// up to [luakit.TryAgainBudget] (500 ms) and then returns it (transient: [luakit.IsTransient]);
// Acquire goes on waiting.
//
// # Conditional commands
//
// Where the server has them, a Lease's renewal and release run without a script: Extend sends
// SET lease owner IFEQ owner PX ttl (Valkey 8.1+, Redis 8.4+) and Release DELIFEQ lease owner (Valkey
// 9.0+) or DELEX lease IFEQ owner (Redis 8.4+), on the connection the acquisition used, as the scripts
// are. They answer as the scripts do: renewed or deleted for this owner (a lease without expiry gets
// the TTL, as PEXPIRE gives it), false or [NotOwned] for an absent key or another owner's value with
// nothing written, and an error matching [ErrForeignData] for a key of another type. A [Locker] learns
// which the server has from one COMMAND DOCS, sent by the first Extend or Release of its Leases (one
// extra round trip, once per Locker: build one Locker per client and share it); the other servers,
// a probe the ACL refuses, and a command the ACL refuses (NOPERM: the script runs instead, and the
// refused command is not tried again by that Locker) keep the scripts. [WithConditionalCommands]
// (false) keeps the scripts everywhere. On Valkey 9.1.2 a TryAcquire + Release cycle costs 5 server
// commands instead of 7 (see the README, "Cost per operation").
//
// # Concurrency
//
// [Locker] and [Lease] are safe for concurrent use. A Lease owns no goroutine, and at most one runtime
// timer; while KeepAlive runs, its renewals are sent by the keep-alive scheduler every Lease of the
// Locker shares (one timer goroutine while any Lease keeps alive, at most 64 renewals in flight; see
// luakit/ownership), and Release waits until no renewal of the Lease is in flight.
package lock
