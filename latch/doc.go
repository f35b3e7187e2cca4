// Package latch provides distributed countdown latches with generations on Redis and Valkey through
// a rueidis client.
//
// # Model
//
// A latch generation starts with a count of pending signals (≥ 0). [Latch.CountDown] decrements it
// atomically; [Latch.Wait] returns nil once it is zero. [Latches.Create] starts the first generation
// (failing with [ErrExists] if a latch is there), [Latches.Join] returns a handle on the current one
// ([ErrNotFound] when none exists), and [Latches.Reset] replaces it with a new generation (create or
// replace). Every handle is bound to its generation's random 128-bit id, and every script checks it,
// so a late CountDown from earlier work returns [ErrReplaced] and never decrements a newer generation,
// and the waiters of a replaced generation return ErrReplaced too.
//
//	ls, _ := latch.New(client)
//	l, _ := ls.Create(ctx, "batch:42", 3)
//	go func() { for range 3 { l.CountDown(ctx) } }() // usually other processes, via ls.Join
//	err := l.Wait(ctx)                              // nil at zero
//
// Beyond counting: [WithExpiry] gives the whole latch a server-side expiry, whose passing makes
// waiters return [ErrLatchExpired] (distinct from ErrReplaced); [Latch.Abort] fails every waiter of the
// generation with an [*AbortedError] carrying a reason, which stays stored so later Join, Wait,
// CountDown and Count calls see it too; [Latch.Delete] removes the generation and wakes its waiters.
//
//   - Create fails ([ErrExists]) when the key holds a latch.
//   - Join returns the current generation; [ErrNotFound] when none exists.
//   - Reset creates or replaces; the old generation's waiters return ErrReplaced.
//   - CountDown returns the remaining count; [ErrReplaced] against a replaced or deleted generation;
//     [ErrCompleted] on a completed one.
//   - Count returns the remaining count; [ErrReplaced] after a Reset or deletion.
//   - Wait returns nil at zero; [ErrReplaced] when replaced or deleted; [ErrLatchExpired];
//     [*AbortedError].
//   - Delete reports whether it deleted this generation (false, no error, when it was already gone).
//
// # Errors
//
// [ErrUncertain], [ErrForeignData] and [ErrNilClient] are luakit's shared values, so one errors.Is
// check serves every Coordkit module. A key holding anything a latch script did not write (another
// Redis type, a hash without the generation, a count that is not a decimal int64 ≥ 0) is reported by
// every call as an error wrapping ErrForeignData and is never changed or replaced. Every bad argument
// or option (an empty key, [ErrInvalidCount], [ErrInvalidExpiry], a recheck interval under 1ms) fails
// before any I/O with an error matching luakit.ErrInvalidConfig. [ErrLatchExpired] is the latch key's
// server-side expiry; it is not luakit.ErrExpired, which means a handle's local estimate elapsed.
// Every error starts with "latch: " and never contains a key.
//
// # Waking
//
// The scripts publish on a sharded Pub/Sub channel when a count reaches zero, a generation is reset,
// aborted or deleted. [Latch.Wait] subscribes to it (SSUBSCRIBE, one subscription per key shared by
// the waiters of one [Latches]) and re-reads the latch after every message and every re-subscription,
// at the expiry deadline, and every recheck interval ([WithRecheckInterval], default 1s) in any case.
// A lost message (a broken connection, a failover) therefore delays completion by at most the recheck
// interval but never blocks it, and only the atomic read decides what Wait returns. Wait's goroutine
// stops and its subscription is dropped (SUNSUBSCRIBE, bounded by 1s on an unresponsive connection)
// before the last waiter of a key returns.
//
// Sharded Pub/Sub is used on every deployment, standalone included, so behaviour is the same
// everywhere: on Cluster the message is routed by slot to the node that owns the key (plain PUBLISH
// would be broadcast to every node), and the script can publish atomically with its write.
//
// # Key layout
//
// One key per latch: a hash with the fields gen (generation id), count and initial (decimal int64s),
// expires (server-time deadline in Unix ms, 0 for none), aborted (the abort reason; present once
// aborted) and prevdone (the previous generation, when a Reset replaced it after it had completed, so
// its late waiters still report completion). The Pub/Sub channel is a sharded channel named exactly
// like the key (channels and keys are separate namespaces), so it always hashes to the key's slot.
// Keys are binary-safe and get the [WithKeyPrefix] prefix; no hash tag is needed on Cluster.
//
// # Guarantees
//
//   - CountDown, Reset, Abort and Delete are each one atomic script; a count never goes below zero,
//     and a generation's count changes only through its own handles.
//   - Late signals from an earlier generation never decrement a newer one, even after the key was
//     deleted and created again (generation ids are random, never reused).
//   - Wait never returns nil unless the generation's count was read as zero (or recorded as
//     completed by the Reset that replaced it); a lost message only delays it.
//   - Counts are exact int64 values (they cross the Lua boundary as decimal strings).
//   - Invalid input (empty key, negative count, expiry under 1ms) fails before any I/O.
//   - A write whose reply was lost is reported as [ErrUncertain], never as success or failure.
//
// # Non-guarantees
//
//   - You choose the key's lifetime. Without [WithExpiry] the key stays until you Delete it; deleting
//     it loses the generation (its waiters return ErrReplaced). Evicting it does the same.
//   - Cancelling Wait never changes the count. A cancelled or timed-out CountDown may still have run.
//   - Asynchronous replication, failover or a restored backup can roll back signals or resets: this is
//     not consensus-safe.
//   - Expiry is decided on the server's clock; a waiter notices it at the deadline it learned when the
//     generation was created or joined.
//   - Anyone may publish on the channel; a message only triggers a re-read, so forged messages cost
//     a read but cannot change an outcome.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later (sharded Pub/Sub needs Redis 7.0), standalone or Cluster.
// RESP2 clients work (rueidis then receives on a dedicated connection). Under ACLs a waiting user
// needs "&<prefix>*" for the channels ([Latch.Wait] fails with [ErrNoPermission] otherwise): Redis 7
// gives new users no channel by default.
//
// # Concurrency
//
// [Latches] and [Latch] are safe for concurrent use. Goroutines run only while a Wait blocks, and
// Wait stops them before it returns, so Latches runs no background work and has no Close.
package latch
