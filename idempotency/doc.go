// Package idempotency records that a request identified by an idempotency key is being handled, then
// stores its result so that duplicates receive the same result instead of running the work again. It
// runs on Redis and Valkey through a rueidis client. Subpackage idemhttp is a net/http middleware on
// top of it (the IETF Idempotency-Key header).
//
// # Model
//
// Each key is one Redis hash that is first a pending claim, then a completed result, with two
// separate lifetimes: the claim lease and the result retention. [Store.TryBegin] runs one Lua script:
// when the key is absent it writes a pending claim (a random owner token, the request fingerprint, a
// generation) that expires after the claim lease, and returns Started with the owner token; otherwise
// it returns Completed with the stored result, InProgress for a pending claim, or
// FingerprintMismatch. While the work runs, the owner renews the lease ([Store.Extend], or
// [Claim.KeepAlive] on the attempt's [Store.Claim], which renews in the background and ends the
// claim's context if the claim is lost), so a short lease (seconds) covers long work, and a crashed owner's claim frees the key after
// at most one lease. [Store.Complete] turns the owner's pending claim into a completed one holding the
// result bytes, kept for the retention (hours) given to it; [Store.Abandon] deletes the owner's
// pending claim. [Store.Begin] waits for an in-progress original instead of returning InProgress;
// [Store.Inspect] reads a claim's state for operators without changing it. Each call is one script
// (EVALSHA, with EVAL after NOSCRIPT).
//
//	st, _ := idempotency.New(client)
//	a, err := st.TryBegin(ctx, key, 10*time.Second, idempotency.FingerprintOf(digest)) // claim lease
//	switch a.State {
//	case idempotency.Started:
//		claim, _ := st.Claim(key, a)
//		_ = claim.KeepAlive(ctx)            // renews every lease/3
//		res := doWork(claim.Context())      // stop when it ends: the claim was lost
//		claim.Stop()
//		ok, err := st.Complete(ctx, key, a.OwnerToken, res, 24*time.Hour) // retention; !ok: lost
//	case idempotency.Completed:
//		replay(a.Result)
//	case idempotency.InProgress, idempotency.FingerprintMismatch:
//		reject()
//	}
//
// Key layout: the key (with the Store's prefix) is a hash with fields s (state), f (fingerprint),
// g (generation), x (the lease last granted while pending, the retention once completed, in ms),
// t (owner token, pending only) and r (result, completed only). Reserve these keys for this package;
// do not edit their fields.
//
// # Errors
//
// [ErrUncertain], [ErrForeignData], [ErrNilClient], [ErrInvalidTTL], [ErrLost] and [ErrExpired] are
// luakit's shared values, so one errors.Is check serves every Coordkit module. A key holding another
// Redis type, or a hash this package did not write, is reported as an error wrapping ErrForeignData
// and is left unchanged. Every bad argument or option (an empty key, a lease or retention under 1ms,
// [ErrInvalidToken], a Claim of an attempt that is not Started, a non-positive retry delay, a nil
// logger) fails before any I/O with an error matching luakit.ErrInvalidConfig. Every error starts
// with "idempotency: " and never contains a key, a token or a result.
//
// The errors every call that sends a script shares (its documentation names any others): a
// bad-argument error as above, before any I/O; an error wrapping ErrUncertain and the cause (such as
// ctx.Err()) when the script may have run but no reply was read (scripts are not retried; a claim
// TryBegin made but never returned expires after its lease); an error wrapping ErrForeignData, nothing
// written; or a server or connection error (see [luakit.Classify]).
//
// # Guarantees
//
//   - At most one pending or completed claim per key in a retained Redis history: of concurrent
//     TryBegin calls on a free key exactly one is Started.
//   - Only Started reveals an owner token; only Completed reveals a result, and only to callers with
//     the same [Fingerprint]. [NoFingerprint] and FingerprintOf("") differ. Inspect reveals neither.
//   - Complete succeeds once, for the current pending owner: the owner token and the claim's generation
//     are both checked, so after the claim's lease ended and another caller claimed the key, the old
//     token can neither renew, complete nor abandon, and the newer claim or result stays intact.
//     Renewals never touch a completed result's retention.
//   - Leases and retentions (at least 1ms, truncated to whole milliseconds, validated before any I/O)
//     are separate: the lease bounds only the pending claim (restarted by each renewal), the retention
//     only the result. Lookups, including mismatches, losing callers and Inspect, never change an
//     existing claim or its expiry.
//   - Results are arbitrary bytes, empty included, copied on input and returned as fresh slices. The
//     store imposes no size limit (bound what you store; idemhttp does).
//   - Outcomes that cannot be known (cancellation, timeout or disconnect after sending) are reported
//     as [ErrUncertain], never as success, and scripts are not retried automatically.
//   - A claim is an owner-token hold of luakit/ownership's kind: its Deadline is that package's local
//     estimate (send time + lease − ownership.ServerClockStep), and [Store.Begin] waits with its
//     Waiter: it sleeps on invalidations of the claim key and wakes when the awaited claim's lease
//     would end, never polling on a fixed period (the contract's waiting rows).
//   - [Claim.KeepAlive] ends the claim's context once the claim can no longer be vouched for: with
//     [ErrLost] when a renewal finds no claim of this owner, with the server's error when a renewal is
//     refused for good (a terminal error such as NOPERM: errors.Is(claim.Err(), ErrNoPermission);
//     never retried), and with [ErrExpired] when no renewal was confirmed before the
//     estimate elapsed (failed and uncertain renewals are retried until then).
//
// # Non-guarantees
//
//   - Duplicates are suppressed only while Redis retains the claim or result. Work that outlives its
//     lease without renewal (a paused process, renewals failing for a whole lease) may overlap a new
//     owner's: KeepAlive then ends the claim's context ([ErrExpired] or [ErrLost]), but cannot stop
//     work that ignores it. Eviction, failover data loss or expiry can allow a repeated side effect:
//     payments and other effects that must survive Redis data loss need durable application
//     transactions or downstream idempotency (the generation can serve as a fencing value there).
//   - A lost reply to TryBegin can leave a claim whose token nobody holds; it blocks the key until its
//     lease ends.
//   - Do not abandon automatically after an error if an external side effect may have happened:
//     abandoning lets a duplicate run the work again.
//   - Generations come from the server clock (TIME in microseconds); they increase across successive
//     claims of a key unless the clock steps back (a failover to a node with a slower clock, an NTP
//     step).
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster (one key per operation, so any key
// works), RESP2 or RESP3. Waiting in Begin wakes on invalidations with RESP3 client-side caching and a
// tracker: the client's from [luakit.NewTrackedClient] (no option needed), or [WithTracker]'s, which
// overrides it (each renewal of the awaited claim also wakes it, to re-check). Without working
// tracking (no tracker, RESP2, DisableCache) it logs one warning per Store and wakes only when the
// awaited claim's lease would end (every second for a claim without expiry), so a completion is
// noticed late.
//
// Under ACLs, [Store.TryBegin] checks that the client's user may run every command of the claim and
// of what its owner will need to finish it (HMGET, HDEL for Complete, DEL for Abandon: see the
// README's ACL); otherwise it fails with [ErrNoPermission] and writes nothing, so no claim is made
// that could not be completed or abandoned.
//
// # Concurrency
//
// A [Store] is safe for concurrent use. It runs no background work of its own (Begin waits in the
// caller's goroutine); each Claim.KeepAlive runs one goroutine until Claim.Stop is called, its ctx
// ends or the claim ends. So a Store has no Close.
package idempotency
