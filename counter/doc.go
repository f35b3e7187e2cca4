// Package counter provides atomic distributed counters on Redis and Valkey through a rueidis client:
// increments with expiry, limit-checked increments and decrements, multi-key reads, pipelined batch
// increments, and buffered counters flushed in the background.
//
// # Model
//
// A counter is one string key holding the canonical decimal form of an int64; an absent or expired
// key reads as 0. Every operation of a [Store] is one round trip: one Lua script per atomic
// transition (incr.lua, limit.lua, floor.lua), one MGET per Cluster slot for [Store.GetMany], or one
// pipeline for [Store.BatchIncrement]:
//
//   - [Store.IncrementWithExpire]: INCRBY, then PEXPIRE ttl when ttl > 0 (on every call: a sliding
//     expiry); returns the new value.
//   - [Store.IncrementUpTo]: allowed iff current + delta <= limit (the new value may equal the
//     limit); INCRBY when allowed, and PEXPIRE ttl only when the call created the key (a fixed
//     window); returns allowed, the new or unchanged value and the remaining TTL. A refusal writes
//     nothing.
//   - [Store.DecrementDownTo]: allowed iff current - delta >= floor (the new value may equal the
//     floor); DECRBY when allowed (expiry unchanged); returns allowed, the value and Remaining =
//     value - floor.
//
// A limit check where the caller chooses what an unreachable server means:
//
//	store, _ := counter.New(client)
//	defer store.Close(ctx)
//	res, err := store.IncrementUpTo(ctx, "quota:{tenant42}", 1, 500, time.Hour)
//	switch {
//	case errors.Is(err, counter.ErrDisconnected):
//		allowed = failOpen // the caller's policy: true to fail open, false to fail closed
//	case err != nil:
//		return err
//	default:
//		allowed = res.Allowed
//	}
//
// [Buffered] accumulates increments locally and flushes them in the background; [Bounded] reserves
// headroom from a global limit in chunks so the limit is never exceeded while most increments need no
// round trip.
//
// # Guarantees
//
//   - Values are exact over the whole int64 range: scripts return values as decimal strings (exact
//     above 2^53), and limit comparisons are done exactly on (high, low) digit groups.
//   - An increment that would overflow int64 fails with [ErrOverflow] and writes nothing; a key holding
//     foreign data (a string that is not a canonical decimal int64, or another type) fails with
//     [ErrNotInteger], which matches luakit's shared [ErrForeignData], and writes nothing; a refused
//     limit check writes nothing.
//   - Under any concurrency, IncrementUpTo never takes a counter above its limit, and the number of
//     allowed increments of delta starting from 0 is exactly limit/delta.
//   - BatchIncrement returns results in input order, each item atomic on its own.
//   - Bad input (empty key, non-positive delta where a positive one is required, negative or
//     sub-millisecond TTL, an invalid option) is rejected before any I/O with an error matching
//     [ErrInvalidConfig].
//   - Every error starts with "counter: " and never contains a key or a counter's value.
//   - While the server is unreachable, calls fail at once with [ErrDisconnected] without touching the
//     client, and succeed again without any action once a background probe reaches the server.
//     Outcomes that cannot be known are [ErrUncertain], never success.
//   - A Store created while the server is down fails fast until connected: its first call sends one
//     PTTL of its key before the command, so that call fails with [ErrDisconnected] and nothing
//     sent. On Cluster that read reaches the node of the call's (first) key only.
//   - A batch is one round trip while the server has the script cached (one EVALSHA per item, no
//     SCRIPT LOAD) and recovers from a flushed script cache like a single call (NOSCRIPT items are
//     re-sent with EVAL).
//
// # Non-guarantees
//
//   - Disconnection is detected from errors: a connection closed by the server, a refused dial or a
//     reset is noticed by the first call that meets it. A silent network partition is noticed only
//     when the client's own timeouts fire (rueidis ConnWriteTimeout, the caller's ctx); calls issued
//     before then wait for them.
//   - The probe proves one connection works again; a call that then meets another connection the
//     client has not yet replaced fails once more with ErrDisconnected and the store re-probes.
//   - One Store has one connectivity state: on Cluster, one unreachable node makes every call fail
//     fast until the probe (sent to a key of the failed call, so to that node) succeeds.
//   - Counters are as durable as the deployment: asynchronous replication can lose the last
//     increments on failover; eviction or deletion resets a counter.
//   - Buffered loses unflushed deltas on a crash (see [Buffered]).
//   - Bounded's loss window: headroom reserved by a process that crashes stays counted (it is never
//     given back), lowering the number of increments the limit still allows; use [WithWindow] to
//     bound the damage. If the counter expires or is deleted while a [Bounded] holds headroom,
//     giving it back is skipped when the value is below the unused amount (the reservation died
//     with the key).
//
// # Key layout
//
// One key per counter: [WithKeyPrefix] + the caller's key, byte for byte. No other keys are used.
// On Cluster, different counters may live on different nodes; each script touches one key.
//
// # Servers
//
// Redis 7.0 and later and Valkey 8 and later, standalone, Sentinel or Cluster. RESP2 or RESP3.
//
// # Concurrency
//
// [Store], [Buffered] and [Bounded] are safe for concurrent use. A Store owns a goroutine only while
// disconnected (the probe), a Buffered one flushing goroutine; each ends in its Close(ctx), which
// waits for it until ctx ends. A Bounded owns none, yet has the same Close(ctx): closing is how it
// gives unused headroom back, so it is a release that must not be skipped, bounded by ctx like any
// round trip. After Close, calls fail with [ErrClosed]; Close itself is idempotent. No value closes
// the caller's rueidis client.
package counter
