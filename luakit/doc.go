// Package luakit is the shared toolkit of Coordkit's coordination
// primitives (locks, leases, rate limits, ...) on Redis and Valkey through
// github.com/redis/rueidis. Applications rarely need it directly; primitive
// modules build on it so that they all treat scripts, keys, errors,
// integers, tokens, server features and waiting the same way.
//
// # Scripts
//
// [Script] runs a named Lua script with EVALSHA, falling back to EVAL on
// NOSCRIPT. Sources live in .lua files embedded with go:embed and loaded
// with [MustLoad]. Keys go in KEYS and values in ARGV; nothing is ever
// concatenated into a script's source. The digest EVALSHA sends is learned
// from the server after the first EVAL, never computed with SHA-1 here, so
// every module works with GODEBUG=fips140=only. A Cluster node's TRYAGAIN
// reply during a slot migration is retried within the call, with backoff,
// for up to [TryAgainBudget] (see there); [DoMulti] does the same for plain
// commands.
//
// Every script of every module is prepared by [MustLoad] with the functions it calls from one
// [Prelude] (server time in ms and µs, the canonical int64 check, the key-type check, the owner check
// and owner-checked delete, the fence counter's checks with every guard) and, where a module has one,
// from its own prelude.lua: no expression is copied from script to script.
//
// # Replies
//
// Every script answers in one of three shapes: a status alone (an integer); a status row, an array
// whose first element is a status and whose other elements are the values the script's header
// documents for it (what [ReplyStatus] and ownership.Pair read); or, for a script on a hot path
// whose success carries one int64 (lock's acquire, counter's increment), that value alone, its other
// answers being status rows (an array costs the client an allocation per reply). A status means the
// same in every script:
//
//	 1  StatusOK         applied (acquired, renewed, released, written), or a read found the state
//	 0  StatusBusy       not applied: others hold or use up the resource (values: until when)
//	-1  StatusAbsent     nothing there: no key, no hold, or it expired
//	-2  StatusNotOwner   held by another owner or generation
//	-3  StatusForeign    the key holds data the primitive did not write (value: reason)
//	-4  StatusCounter    the fence counter cannot issue a token (value: a CounterReason)
//	-5  StatusMismatch   stored settings differ from the call's (value: what is stored)
//	-6  StatusAborted    the generation was aborted (value: the reason)
//	-7  StatusCompleted  the work already completed (values: its result, if any)
//
// Every status but 1 means nothing was written (pruning of expired entries aside). A value -1 is only
// ever a PTTL's "no expiry". A script raises an error reply only for what no status describes; its
// text then starts with a Coordkit code (COORDKIT, or ratelimit's RLFOREIGN, RLMISMATCH, RLDEBT),
// never with one of the server's prefixes (ERR, WRONGTYPE...), except luakit_acl's NOPERM, which is
// the server's refusal named in advance.
//
// # Command order and deadlines
//
// An owner-checked cleanup sent after a command whose reply timed out must run on the server after
// that late command, never before it. Two rueidis behaviours would break that order:
//
//   - A command whose context has a deadline is sent on an idle connection synchronously with a socket
//     deadline, and the connection is closed when the deadline passes. The cleanup then travels on a
//     new connection: it can reach the server before the late command still in the old one, or not at
//     all while the new connection's handshake is slow. Without a deadline ([WithoutDeadline]) the
//     command goes through the connection's pipeline queue; giving up on its reply leaves the
//     connection open, and a cleanup sent next on it is queued behind the late command.
//   - Exec's commands carry their key's slot, which a standalone client uses to spread commands at
//     random over its pipelined connections (2^ClientOption.PipelineMultiplex of them, by default
//     log2(GOMAXPROCS) capped at 2, so 4 from 4 CPUs up): a later command on another connection can
//     overtake an earlier one, or wait on a connection still being dialled. [Script.ExecOrdered] sends
//     every call on the first pipelined connection.
//
// Where the order does not hold: on a Cluster client, where ExecOrdered is Exec (commands are routed
// by slot; each node gets one pipelined connection unless PipelineMultiplex is raised above its
// Cluster default of 0); with ClientOption.DisableAutoPipelining, where every command borrows a pooled
// connection and runs synchronously, so consecutive calls may take different connections; and across
// a connection that breaks between two calls, which loses the first one's place.
//
// # Closed clients
//
// rueidis (seen with v1.0.79 and v1.0.80, standalone and Cluster clients) connects its pipelined
// connections lazily, and a connection whose dial was in flight when Close ran is stored after Close
// and keeps serving commands: in a test that closes a client while commands are being sent, later
// commands succeeded on 84 of 300 standalone clients and 123 of 300 cluster clients. A closed client
// that half works defeats code that treats rueidis.ErrClosing as "stop" (a leader election's Run, a
// lock waiter): it could campaign or wait on forever. [GuardClose] makes Close final for every later
// command, and [NewTrackedClient] applies it.
//
// # Keys
//
// [Keyspace] prepends a prefix to every key, byte for byte (keys may hold
// any bytes). [Slot] and [HashTag] compute Redis Cluster hash slots exactly
// as the server does, and [CheckSameSlot] / [CheckKeys] fail a multi-key
// operation with a [*CrossSlotError] (naming key roles, never key bytes)
// before anything is written.
//
// # Errors
//
// [Classify] sorts an error into [ClassTransient] (the server said "not
// now": retry with backoff), [ClassTerminal] (retrying will not help),
// [ClassUncertain] (no reply: the command may or may not have run, so
// ownership changes must fail closed) or [ClassUnknown]. Missing server
// features are reported as [*UnsupportedError] (errors.Is ErrUnsupported),
// found by probing commands with [Probe] / [FeatureCache], never by parsing
// version strings.
//
// # Conditional commands
//
// Newer servers compare a string with a value and write in one plain command: SET key value IFEQ
// expected ([ConditionalSet]: Valkey 8.1+, Redis 8.4+), DELIFEQ key value ([DelIfEq]: Valkey 9.0+)
// and DELEX key IFEQ value ([DelEx]: Redis 8.4+, Valkey 9.2+). For an owner-checked renewal
// (SET key token IFEQ token PX ms) and delete they answer as the owner-check scripts do: the write
// for the owner's value, nothing written for an absent key or another value (SET's nil, DELIFEQ's
// 0), WRONGTYPE for a key of another type (as the script's GET); SET ... PX sets the expiry whether
// the key had one or not, as PEXPIRE. Measured on Valkey 9.1.2, a lock's release drops from an
// EVALSHA running GET and DEL (3 commands in commandstats) to 1. [ConditionalCommands] probes for them
// once per client, uses them through [DoOrdered] (the order of [Script.ExecOrdered]) and leaves the
// scripts to the servers without them and to ACL users refused them. SET IFEQ is an argument, not a
// command, so the probe reads COMMAND DOCS instead of COMMAND INFO.
//
// # Integers: the Lua number trap
//
// Redis Lua numbers are IEEE doubles, exact only up to 2^53. A script that
// returns a number above that (a fencing token, a counter) returns a
// rounded value: with a counter at 9007199254740994,
// "return redis.call('INCR', k)" yields 9007199254740996, not ...995.
// Scripts in Coordkit therefore return 64-bit values as decimal strings
// (for example the reply of GET after INCR) and Go decodes them with
// [ParseInt64] or [Int64], which accept only canonical decimal int64s, and
// encodes ARGV with [FormatInt64].
//
// # Owner tokens
//
// [OwnerToken] returns 128 random bits as 32 hex characters. Tokens prove
// ownership: never log them or use them as metric attributes.
//
// # Waiting without polling
//
// With RESP3 client-side caching (the rueidis default), the server pushes an
// invalidation when a key a connection has read changes or expires. A
// [Tracker], wired into rueidis.ClientOption.OnInvalidations (or built with
// [NewTrackedClient]), turns these pushes into wake-ups on a [Watch]. A
// waiter calls Tracker.Watch, then [Arm] (a cached PTTL read that makes the
// server track the key and reports how long to wait at most), tries its
// operation, and sleeps until the Watch fires or the PTTL deadline passes,
// then tries again. Every wake-up means "try again", never "acquired".
// Without tracking (RESP2, caching disabled) no invalidation arrives and
// the PTTL deadline alone drives the wait.
//
// # Concurrency
//
// Every function and method in this package is safe for concurrent use
// unless its documentation says otherwise.
package luakit
