// Package faults is Coordkit's fault-injection suite: five workloads run together on one target
// (redis8, valkey9 and redis-cluster of the matrix) while a nemesis injects faults; every operation
// and observation is recorded in one history, and checkers assert safety properties of that history
// afterwards. Timing never decides pass or fail: the checkers look at the order of events and at the
// values the servers returned, never at how fast anything was.
//
// # Nemesis
//
// Four clients (as if four processes) reach every server process through in-process proxies of their
// own (testkit.Proxy; on a cluster one per node, chosen by a dial function), so a network fault hits
// one client. After a 300ms calm start the nemesis runs, one fault at a time, each after a gap of
// 100-500ms: a server process (a cluster node) paused with SIGSTOP for 0.1-1s; 50-400ms latency on
// every reply to one client for 0.3-1s; one client's connections cut; one client's replies dropped
// for 0.1-0.5s (its requests still run: uncertain outcomes); one client partitioned (connections
// closed and dials refused) for 0.2-1s, half of the time the client of the candidate elected last.
// The schedule is a function of the seed alone: the test prints the seed, and COORDKIT_FAULT_SEED
// replays the same schedule (each target derives its own seed from it).
// COORDKIT_FAULT_DURATION (default 12s) sets how long the nemesis runs per target.
//
// # History
//
// An event has a sequence number Seq from one atomic counter. An operation takes CallSeq just before
// its call and Seq when its reply or error was read, so an operation whose Seq is below another's
// CallSeq finished before the other began. Its outcome is ok (the reply was read), failed (an error
// not matching luakit.ErrUncertain: it did not happen) or uncertain (an error matching
// luakit.ErrUncertain: it may have happened, at any time after its call, and is never counted as a
// success or a failure). Observations that checkers compare (a fenced write with the holder's
// estimate, a leadership sample, a handler's start or end) take their Seq while holding their
// workload's lock, so their Seq order is the real order of those steps. Nemesis steps are events too.
// On a violation the suite fails with the violation and an excerpt of the history around it (events
// of that workload and of the nemesis, the proving ones marked).
//
// # Checkers
//
//   - Lock with a fenced store: two workers take one lock (TryAcquire, 400ms TTL), write to a
//     fence.Fence (testkit/fence) while Remaining() > 0 (read under the store's lock), renew sometimes, release or
//     abandon the lease, and sometimes write again with the old token afterwards. No stale write is
//     accepted (an accepted token is never below one accepted earlier); tokens of acquisitions that
//     returned a lease are distinct and increase in real-time order; the Seq spans in which distinct
//     leases were observed holding never interleave and their tokens increase; at the end no lease
//     is left (every lease key is gone within its TTL and none lacks an expiry).
//   - Leader terms: three candidates of one election (1s lease) on three clients. Each elected
//     callback checks Term.Err under a shared lock every 3ms and relinquishes after 0.2-3s; a sampler
//     reads Election.Current of every candidate under the same lock every 2ms. A term's fencing token
//     is never observed leading on two candidates, and the Seq spans of distinct terms never
//     interleave (no instant with two leaders), with increasing tokens; the lease key is gone at the
//     end.
//   - Idempotency executions per key: two workers claim keys of a sliding window of three with
//     TryBegin (300ms claim); a Started claim runs a handler whose start and end are recorded under a
//     lock with whether the claim could have ended (send time + lease - 2ms), then completes with the
//     run's id (or abandons). Two runs of one key that both began and ended within their claims never
//     interleave; every replayed result is bytes some Complete of that key sent, never an older one
//     after a newer Complete is known to have succeeded; where Complete takes a retention (a minute,
//     longer than the run) a key is also completed at most once and never started again after.
//   - Rate-limit admissions replayed against server time: two workers call Allow on one sliding
//     window (8 per 200ms). Among admissions known to have happened, no set of more than 8 lies
//     within 200ms of server time (ratelimit.Result.At); uncertain attempts can only have used
//     capacity, so they are not counted.
//   - Counter limits: two workers increment (IncrementUpTo 10) and decrement (DecrementDownTo 0)
//     keys by 1-3 and read them, moving to a new key every 250 operations. No returned or final value
//     leaves [0, 10]; each key's history is checked for linearizability with porcupine against a
//     sequential counter (uncertain calls stay open until the end of time and accept any reply),
//     bounded to 3s per key: a timeout is reported as Unknown, never as a failure.
//
// # Seeing a checker fail
//
// TestCheckers gives every checker a small history that breaks its property. Against real servers,
// flip one of the switches in the test files and run with COORDKIT_TARGETS=redis8: lockLoad.acceptStale
// (the store accepts every write), leaderLoad.skipCheck (callbacks report leading without asking
// their term and ignore revocation), doubleCount (the counter model counts each change twice); each
// makes the suite fail with its checker's violations and history excerpts.
//
// Each run also prints its operations (ok / failed / uncertain per workload), the faults by kind and
// the violations by checker. goleak (testkit.GoleakOptions) checks that nothing outlives the tests.
package faults
