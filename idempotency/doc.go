// Package idempotency records that a request identified by an idempotency key is being handled, then
// stores its result so that duplicates receive the same result instead of running the work again. It
// runs on Redis and Valkey through a rueidis client. Subpackage idemhttp is a net/http middleware on
// top of it (the IETF Idempotency-Key header).
//
// # Model
//
// Each key is one Redis hash. [Store.TryBegin] runs one Lua script: when the key is absent it writes a
// pending claim (a random owner token, the request fingerprint, a generation, the TTL) that expires
// after the TTL, and returns Started with the owner token; otherwise it returns Completed with the
// stored result, InProgress for a pending claim, or FingerprintMismatch. [Store.Complete] turns the
// owner's pending claim into a completed one holding the result bytes and restarts the TTL;
// [Store.Abandon] deletes the owner's pending claim. [Store.Begin] waits for an in-progress original
// instead of returning InProgress. Each transition is one script (EVALSHA, with EVAL after NOSCRIPT).
//
//	st, _ := idempotency.New(client)
//	a, err := st.TryBegin(ctx, "tenant-42:create-invoice:req-123", 10*time.Minute, idempotency.FingerprintOf(digest))
//	switch a.State {
//	case idempotency.Started:
//		res := doWork()
//		ok, err := st.Complete(ctx, key, a.OwnerToken, res) // !ok: the claim expired first
//	case idempotency.Completed:
//		replay(a.Result)
//	case idempotency.InProgress, idempotency.FingerprintMismatch:
//		reject()
//	}
//
// Key layout: the key (with the Store's prefix) is a hash with fields s (state), f (fingerprint),
// g (generation), x (TTL in ms), t (owner token, pending only) and r (result, completed only). Reserve
// these keys for this package; do not edit their fields.
//
// # Errors
//
// [ErrUncertain], [ErrForeignData], [ErrNilClient] and [ErrInvalidTTL] are luakit's shared values, so
// one errors.Is check serves every Coordkit module. A key holding another Redis type, or a hash this
// package did not write, is reported as an error wrapping ErrForeignData and is left unchanged. Every
// bad argument or option (an empty key, a TTL under 1ms, [ErrInvalidToken], a non-positive recheck
// interval or retry delay) fails before any I/O with an error matching luakit.ErrInvalidConfig.
// Every error starts with "idempotency: " and never contains a key, a token or a result.
//
// # Guarantees
//
//   - At most one pending or completed claim per key in a retained Redis history: of concurrent
//     TryBegin calls on a free key exactly one is Started.
//   - Only Started reveals an owner token; only Completed reveals a result, and only to callers with
//     the same [Fingerprint]. [NoFingerprint] and FingerprintOf("") differ.
//   - Complete succeeds once, for the current pending owner: the owner token and the claim's generation
//     are both checked, so after the claim expired and another caller claimed the key, the old token can
//     neither complete nor abandon, and the newer claim or result stays intact.
//   - The TTL (at least 1ms, truncated to whole milliseconds, validated before any I/O) bounds the
//     pending claim and restarts on completion for the result. Lookups, including mismatches and
//     losing callers, never change an existing claim's expiry.
//   - Results are arbitrary bytes, empty included, copied on input and returned as fresh slices. The
//     store imposes no size limit (bound what you store; idemhttp does).
//   - Outcomes that cannot be known (cancellation, timeout or disconnect after sending) are reported
//     as [ErrUncertain], never as success, and scripts are not retried automatically.
//
// # Non-guarantees
//
//   - Duplicates are suppressed only while Redis retains the claim or result. A handler that outlives
//     its pending TTL may overlap a new handler; choose a TTL longer than the work plus the clients'
//     retry window. Eviction, failover data loss or expiry can allow a repeated side effect: payments
//     and other effects that must survive Redis data loss need durable application transactions or
//     downstream idempotency (the generation can serve as a fencing value there).
//   - A lost reply to TryBegin can leave a claim whose token nobody holds; it blocks the key until it
//     expires.
//   - Do not abandon automatically after an error if an external side effect may have happened:
//     abandoning lets a duplicate run the work again.
//   - Generations come from the server clock (TIME in microseconds); they increase across successive
//     claims of a key unless the clock steps back (a failover to a node with a slower clock, an NTP
//     step).
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster (one key per operation, so any key
// works), RESP2 or RESP3. Waiting in Begin wakes on invalidations only with RESP3 client-side caching
// and [WithTracker]; otherwise it re-checks periodically.
//
// # Concurrency
//
// A [Store] is safe for concurrent use. It owns no goroutines and runs no background work (Begin
// waits in the caller's goroutine), so it has no Close.
package idempotency
