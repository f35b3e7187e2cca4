// Package redlock provides the Redlock quorum lock over several independent Redis or Valkey
// deployments through rueidis clients, with an optional fenced mode.
//
// The algorithm is the one described in the Redis documentation's "Distributed Locks with Redis"
// (https://redis.io/docs/latest/develop/clients/patterns/distributed-locks/), run in parallel instead of
// node by node.
//
// # Model
//
// A [Group] holds N independent clients (N odd, at least 3; quorum N/2+1). A lock is one string key per
// node holding a random 128-bit owner token with a PX expiry.
//
//	g, _ := redlock.NewGroup([]rueidis.Client{a, b, c, d, e})
//	l, err := g.TryAcquire(ctx, "invoice:42", 10*time.Second)
//	if err != nil { return err }            // errors.Is(err, redlock.ErrNotAcquired)
//	defer l.Close()
//	_ = l.KeepAlive(ctx)                    // optional: renew on a quorum every TTL/3
//	work(l.Context())                       // ends when the lock is lost or its validity elapses
//
// Acquisition takes the time, sends SET key token NX PX ttl to every node in parallel, each bounded by
// the node timeout (default 1s), and waits for all replies or timeouts. It succeeds only when a majority
// granted the lock (not counting nodes in restart quarantine, see below) and validity = TTL − elapsed −
// (TTL × drift factor + 2ms) is positive (drift factor default 0.01). Otherwise an owner-checked delete goes to every node, including the ones that failed
// or timed out. Per-node failures are reported as a [*QuorumError] listing each [NodeError] (index,
// address, cause).
//
// A [Lease] is an owner-token handle: Extend, ExtendTTL, KeepAlive, Verify, Release, Done, Context, Err,
// Remaining, Deadline and TTL behave as the contract in package
// github.com/coordkit/coordkit/luakit/ownership says, a quorum of nodes standing for the server. What
// differs:
//
//   - The local estimate ends at send time + TTL − drift allowance, never at send time + TTL.
//   - Extend and Verify send one owner-checked script per node (extend.lua, verify.lua). They hold when
//     a majority confirms. They find the lock lost ([ErrLost]) when the nodes that lack the token leave
//     fewer than a quorum that could confirm; a renewal then also deletes the token on every node
//     (owner-checked, bounded by the node timeout). Anything between, such as failures and timeouts on
//     too many nodes, is a [*QuorumError] wrapping [ErrUncertain] and [ErrNoQuorum]: the lock keeps its
//     previous estimate.
//   - Release deletes on every node: [Released] when a quorum replied and at least one of them deleted
//     the token, [NotOwned] when a quorum replied and none held it, a [*QuorumError] wrapping
//     [ErrUncertain] when fewer than a quorum replied (Release can be sent again). A node replied when
//     its script ran, whatever it found; afterwards this owner's token is not on it. Once sent, the
//     deletes run to the node timeout even when ctx ends; [Lease.Close] is one Release with a background
//     context.
//   - Two choices that follow the shared ownership contract
//     (luakit/ownership) so that every Coordkit handle behaves alike: an Extend cancelled mid-flight
//     does not end the lock, it is uncertain (the renewal may still run on the nodes, so ending the
//     lock would under-report a hold that exists; the lock keeps its previous, shorter estimate and a
//     later Extend can renew it); and a Release whose ctx has already ended sends nothing and leaves
//     the lock usable (an ended ctx is the caller's "do no more I/O"; call Release again, or Close,
//     to delete), while one already sent runs to the node timeout as above.
//   - [Group.Acquire] retries after random delays instead of waking on key invalidations (see its
//     documentation).
//
// # Fenced mode
//
// With [WithFencing](fenceKey), every node also keeps a persistent integer counter at fenceKey. The
// acquisition script reads the counter atomically with the SET NX on each node; the token is the highest
// counter among the nodes that granted the lock, plus one. The token is then written back with a
// set-if-greater script that runs only while this owner's token is still the lock's value on that node,
// to every granting node. A fenced acquisition needs more than a quorum: w = [Group.FencedQuorum] =
// N/2 + 2 nodes (4 of 5, 5 of 7, all 3 of 3) must both grant the lock and confirm the token, besides
// the usual quorum of grants outside restart quarantine. With fewer grants no token is sent; with fewer
// confirmations the attempt fails too; both are a [*QuorumError] with Op "fence", cleaned up by
// owner-checked deletes on every node (a counter already raised stays raised, which only makes later
// tokens larger). [Lease.FencingToken] returns the token.
//
// What this guarantees, with f = 2 for every N: as long as at most two nodes lose data (restart
// without persistence, restore of an older snapshot, failover to a lagging replica, deletion of the
// counter) between two successive fenced acquisitions of the group, every fencing token is strictly
// greater than the token of every lock on the same group (any key) whose holder had released it, or
// whose lock had expired or been deleted on the nodes involved, before the new holder's acquisition
// reached them; whichever nodes granted either lock. The argument needs no clocks: the earlier holder
// wrote its token to a set W of w nodes while holding the lock on each; the later holder was granted
// on a set M of at least w nodes and read each one's counter in the granting script, and on a node of
// M ∩ W it could set the lock only after the earlier holder's lock was gone there, hence after the
// write. Two sets of w = N/2 + 2 of N nodes share at least 2w − N = 3 nodes, so after f = 2 of them
// lost their data one still holds the earlier token and the later one is greater. (With w = N/2 + 1, the
// quorum, two sets may share a single node, and losing it can reissue a token.) Tokens are exact int64 values (above 2^53 too: they cross Lua as decimal strings and
// compare as strings); the counter never expires; tokens can skip values; different keys of one group
// can receive equal tokens (one counter serves the group).
//
// What it costs: a fenced acquisition fails while more than N − w = N/2 − 1 nodes are unreachable,
// held by another owner or unusable (one of 5, two of 7, none of 3: with three nodes every one must
// answer; use five or more).
//
// What it does not guarantee: it does not make Redlock a consensus protocol. If three or more nodes
// lose their data between two successive fenced acquisitions (f + 1; for N = 5 that is a majority),
// the later holder may read no node that saw the earlier token and receive it again, or a lower one.
// Two holders can still overlap in time (see below); the token only lets the protected resource reject
// the older one, and only if the resource itself atomically refuses a token lower than the highest it
// has accepted. A fencing token is not a capability.
//
// # Restart quarantine
//
// A node whose server restarted without its data has forgotten the locks it held, so a second client
// could assemble a majority with it while the first still holds. The Redis document's remedy is to
// keep a restarted node out of service for at least the longest TTL ("delayed restarts"); the group
// enforces it, by default ([WithRestartQuarantine]):
//
//   - Every acquisition script also runs INFO server and returns the server's run_id and
//     uptime_in_seconds: no extra round trip. (Redis 7.0+ and Valkey 8+ allow INFO in scripts; it is
//     not flagged noscript. A separate INFO per acquisition would cost a round trip, and a cache of it
//     refreshed only on reconnects misses a restart whose broken connection another caller of the
//     same client met first.) The price is server CPU: on Redis 8.0.6 here (redis-benchmark -P 16,
//     2 shared cores) the acquisition script alone ran about 100k times/s without INFO and 40k with
//     it, some 15µs more per call. Renewals, Verify and Release send no INFO.
//   - A grant counts towards the quorum only from a node whose server has been up for at least the
//     quarantine Q; otherwise its [NodeError] wraps [ErrQuarantined]. The group remembers, per node,
//     the run_id it last saw and the latest instant that process can have started, on the local
//     monotonic clock: reply time − (uptime − 1s), the second covering the server's whole-second
//     rounding. A new run_id starts it again: from that instant for a restart, from the moment the
//     group sees it for a process that started before the previous one last answered (a replica
//     promoted by a failover: its uptime says nothing about when it took over); later replies of the
//     same run_id do not move it. It logs each quarantine once per run_id (the node's
//     address, Q and what is left; never keys or tokens).
//   - Q is the longest TTL the group has requested (TryAcquire, Acquire, ExtendTTL), or
//     [WithLongestTTL] if longer. A group cannot learn the TTLs of other processes: set WithLongestTTL
//     to the longest TTL any client uses on the nodes.
//
// The cost: after each restart a node counts in no acquisition for Q, and a group that first sees a
// node less than Q after its start counts it only from then on, so groups over freshly started servers
// acquire nothing until the servers have been up for Q; while quarantined and unreachable nodes
// together leave fewer than a quorum, acquisitions fail. Renewals, Verify and Release are not
// affected: they count nodes holding this owner's token, which a restarted empty node does not (a lock
// left without a quorum finds that out at its next renewal, and its estimate ends within a TTL of its
// last confirmed one, so before Q has passed). Not covered: a node that loses data without restarting
// (FLUSHALL, a deleted key), locks with a TTL longer than Q, a failover the group first notices after
// its clients moved (a group that never saw the previous primary takes the replica's uptime at its
// word), and a server wall clock that jumped forward before the group first saw the node (uptime is
// wall-clock based). A user whose ACL forbids INFO gets NOPERM on every acquisition (nothing written):
// grant INFO or turn the quarantine off.
//
// # Guarantees
//
//   - Acquisition succeeds only with a majority of grants and positive validity; the local estimate
//     (Remaining, Done, Context) starts at the moment before the requests were sent and ends at
//     start + TTL − drift allowance, so on clocks within the drift factor it ends before any node's key
//     expires. Every confirmed renewal restarts it from the renewal's send time; a renewal whose quorum
//     answered after the estimate elapsed is not a success (the lock ends with [ErrExpired] and is
//     deleted on every node).
//   - A failed attempt sends an owner-checked delete to every node (never touching another owner's lock).
//     A node whose reply came after the node timeout counts as failed; a SET that it applies late is
//     deleted by that cleanup, which is queued behind it on the same connection: every node command
//     goes through luakit's Script.ExecOrdered (the client's first pipelined connection, whatever
//     ClientOption.PipelineMultiplex says) and is bounded by cancellation, not by a socket deadline,
//     so giving up on a reply leaves the connection open; and a node's command of one step is queued
//     only after that node's command of the previous step of the same lock (acquire, fence, extend,
//     verify, release, cleanup) was queued, or given up before queueing.
//     A late SET stays, until its TTL, only when that connection breaks in between, when the cleanup's
//     own node timeout passes first, or on clients with DisableAutoPipelining (pooled connections,
//     where no order holds).
//   - The node timeout bounds every step even while a client is still connecting to a node that
//     accepted the TCP connection but does not answer: the step stops waiting at the node timeout
//     (rueidis finishes the handshake, or gives up at the client's Dialer.Timeout, in the
//     background); the command then is not sent, since its context ended first.
//   - Outcomes that cannot be known (timeout, cancellation, broken connection) are reported per node as
//     [ErrUncertain], never counted as success, nor as a node's refusal.
//   - Invalid input (empty key, TTL under 1ms or not above the drift allowance, lock key equal to the
//     fence key) fails before any I/O; [NewGroup] rejects nil, duplicate and Cluster clients and even or
//     too small groups.
//
// # Non-guarantees (no consensus)
//
// A lock key holding any value another writer left reads, on that node, as another owner's lock
// ([ErrHeld]); keep the lock's keys to the lock.
//
// Redlock is not a consensus algorithm; as Martin Kleppmann's critique ("How to do distributed locking",
// 2016) points out, its mutual exclusion rests on timing assumptions:
//
//   - Clock drift and jumps: a node whose clock runs fast, or jumps forward, expires the key early; the
//     drift factor covers only bounded, slow drift.
//   - Process pauses and network delays: a holder paused (GC, swapping, SIGSTOP) beyond its validity keeps
//     acting on a lock others now hold. The validity is a local estimate that cannot detect this; only a
//     resource that checks fencing tokens can.
//   - Persistence and restarts: a node that restarts without its data (no AOF with fsync=always, or a
//     restart before the last write reached disk) forgets the lock. The restart quarantine (above) keeps
//     it out of acquisitions' quorums for the longest TTL the group knows of; with the quarantine off,
//     or for locks with a longer TTL, a second client can assemble a majority with it. Replication and
//     failover behind a node (Sentinel) have the same effect: a promoted replica may lack the key and
//     the counter (its run_id differs, so a group that saw the previous primary quarantines it).
//   - Unreachable nodes: a node that cannot be reached keeps the lock until its TTL ends. After a node
//     restarts, each of the client's connections to it fails its next command once (rueidis then
//     reconnects), so that node counts as failed for one step. A node that exceeded the node timeout
//     counts as failed; if its connection breaks before the cleanup is queued behind the late command,
//     that command may still run and hold the token until expiry, which can block the quorum of the
//     next attempts.
//   - Verify asks each node at a slightly different instant: a quorum that confirms says that each of
//     those nodes held the token when its script ran, not that a majority held it at one moment, and
//     nothing about any later moment.
//
// Use a consensus-backed lock (etcd, ZooKeeper) or a fencing authority when stale owners must be
// rejected under every failure; use fenced mode with a checking resource to narrow the window.
//
// # Key layout
//
// On every node: the lock key (prefix + key) is a string holding the owner token, with a PX expiry; in
// fenced mode the fence key (prefix + fenceKey) is a persistent string holding a non-negative decimal
// int64. Reserve both for this package; never expire or delete the counter. A counter that has an
// expiry, a non-string type or a non-decimal value makes that node fail with a [*CounterError] (nothing
// written there).
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone deployments (or Sentinel-managed primaries with the
// caveats above); each client of a group must reach a different, independently failing deployment.
// Cluster clients are rejected. RESP2 and RESP3 both work.
//
// # Concurrency
//
// [Group] and [Lease] are safe for concurrent use. Every operation starts one goroutine per node and
// returns when each replied or the node timeout passed; a goroutine given up on ends when its client
// returns. A Lease's Extend and Release run one at a time; Verify runs beside them. Nothing runs in the
// background except a timer that closes the lock's Done and the Group's keep-alive scheduler: one
// timer goroutine while any Lease keeps alive, and at most 64 renewals in flight (each with its
// goroutine per node), whatever the number of leases.
package redlock
