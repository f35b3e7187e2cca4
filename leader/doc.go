// Package leader elects one leader among processes through a fenced lease on Redis or Valkey, built on
// the [github.com/coordkit/coordkit/lock] module.
//
// # Model
//
// Every candidate creates an [Election] with the same name, which stands for two keys in one Cluster
// slot (see # Key layout): the lease key (a string holding the leader's random owner token with a PX
// expiry) and the fence key (a persistent counter issuing fencing tokens). [Election.Run] campaigns:
// it waits for the lease without polling (woken by RESP3 invalidations on a client from
// [github.com/coordkit/coordkit/luakit.NewTrackedClient] with no option, or with [WithTracker]; and at
// the holder's PTTL deadline in every case) and takes it with one atomic script that also issues the
// next fencing token. The winner starts a [Term]: its
// [OnElected] callback runs with the term's context and fencing token while Run renews the lease at half
// the lease duration.
//
//	el, _ := leader.New(client, "scheduler", // keys {scheduler}:lease and {scheduler}:fence
//		leader.WithLeaseDuration(15*time.Second),
//		leader.OnElected(func(ctx context.Context, term leader.Term) error {
//			return schedule(ctx, term.FencingToken) // the resource rejects lower tokens
//		}))
//	err := el.Run(ctx) // blocks until ctx ends or a terminal error
//
// A term is revoked (its context cancelled, [OnRevoked] called once) when a renewal is refused (cause
// [ErrLost]), when no renewal was confirmed before the lease's local deadline minus a safety margin
// ([ErrExpired]; self-fencing: the leader steps down before the server can expire its lease and elect
// another), when the elected callback returns (relinquishing leadership: [ErrReleased]), or when Run's
// context ends (its cause). The causes are luakit's, the same that end every Coordkit handle. Both
// callbacks must finish before the lease is released and the candidate campaigns again, so within one
// process terms never overlap.
//
// # Guarantees
//
//   - At most one unexpired lease per lease key, within one retained Redis history: at most one
//     candidate's renewal succeeds at a time.
//   - A leader's term is revoked locally before its server lease can expire (on a sane clock: the
//     local deadline is measured from before the acquiring or renewing request was sent, and the
//     safety margin absorbs clock-rate drift and the time to stop work), so a cooperative leader stops
//     before a successor can be elected.
//   - Fencing tokens of successive terms strictly increase within one retained history.
//   - A dead leader's lease expires within the lease duration of its last renewal; a healthy candidate
//     takes it within the retry delay after expiry (at once on release when waiting is tracked), plus
//     network latency.
//   - Transient failures are retried; terminal ones end Run with the error; a callback's error or panic
//     ends Run after the lease is released. No goroutine outlives Run.
//
// # Non-guarantees
//
//   - A fencing token is not a capability: it cannot stop a paused or partitioned process that keeps
//     working after its term ended (a callback that ignores its context, a GC pause, a stalled VM).
//     Downstream resources must atomically reject writes whose token is lower than the highest they
//     accepted (for example UPDATE ... WHERE last_token <= $token); only that makes leadership safe.
//   - Tokens are not globally monotonic: asynchronous replication can lose the counter's last
//     increments on failover, and restoring a backup, deleting, expiring or evicting the counter can
//     reissue or lower tokens. Reserve both keys for the election, run on a non-evicting deployment,
//     and use a consensus-backed authority when tokens must survive failover.
//   - [Election.Current] is a local observation, not a server check.
//   - An acquisition whose reply is lost may hold the lease until it expires without electing anyone.
//
// # Errors
//
// Transient: the server replies LOADING, BUSY, CLUSTERDOWN, TRYAGAIN, MASTERDOWN and READONLY (READONLY
// lets campaigning resume after a failover window), and uncertain outcomes (timeouts, broken
// connections); they are retried after the retry delay and counted in [MetricAcquireFailures].
// Attempts that do not reach the server (refused or broken connections, timeouts) are retried only for
// the connection-recovery budget ([WithRecoveryBudget], [DefaultRecoveryBudget]): exhausting it is
// terminal ([ErrRecoveryExhausted]).
// Terminal: replies [github.com/coordkit/coordkit/luakit.Classify] calls terminal (NOPERM, WRONGTYPE,
// authentication), an invalid fence counter ([lock.CounterError]), a closed client (rueidis.ErrClosing)
// and invalid configuration (rejected by [New]). Fix the cause (credentials, ACLs, the counter) or
// recreate the client before running again.
//
// # Key layout
//
// By default the keys are derived from the election's name as the lock module derives a named lock's
// ([github.com/coordkit/coordkit/lock.Keys]): the lease key "{name}:lease" and the fence key
// "{name}:fence", each after the [WithKeyPrefix] prefix, so they share a hash tag and one Cluster slot
// on every deployment (the lock package documentation states the rule exactly, braces in names
// included; the only names it cannot tag start with '}', and New rejects them). An election and a
// lock with the same name and prefix share the same keys: they are the same lock.
//
// [WithKeys] keeps an existing layout's two keys. They must differ, and [New] checks that they share a
// slot on a Cluster client and, with [WithStrictSlots], on every client.
//
// # Lifecycle
//
// An Election runs background work but has no Close, the one exception the shared vocabulary makes:
// [Election.Run] blocks for the election's life and ends with its ctx; [Election.Start] runs it in the background until
// [Election.Stop], and [Election.Stopped] is closed when that run has returned. A term's end is told
// by its own [Term.Context], as a handle's by its Done.
//
// Close the client only after Run returned. A client closed under Run ends it only if the client then
// refuses commands: rueidis (v1.0.79) can revive a connection whose dial was in flight when Close
// ran, and Run would keep campaigning on it. Clients made by
// [github.com/coordkit/coordkit/luakit.NewTrackedClient] or wrapped by
// [github.com/coordkit/coordkit/luakit.GuardClose] refuse every command after Close.
//
// # Servers
//
// Redis 7.0 and later, Valkey 8 and later, standalone or Cluster. RESP2 clients work; waiting then
// relies on the PTTL deadline, so a released lease is taken over only when its TTL would have passed
// (one warning per Election says so). The ACL user needs lock's commands (EVALSHA, EVAL, EVALSHA_RO,
// EVAL_RO, GET, SET, INCR, TYPE, PTTL, PEXPIRE, DEL on the election's keys) and the client's own (CLIENT
// TRACKING, CLIENT CACHING, MULTI, EXEC for tracker wake-ups); see the README for the ACL SETUSER line.
// A NOPERM reply ([ErrNoPermission]) ends Run, from a campaign, a renewal or the release at a term's end.
//
// # Telemetry
//
// Int64Counters [MetricChanges] (attribute state=elected|revoked) and [MetricAcquireFailures] on the
// meter "github.com/coordkit/coordkit/leader" of [WithMeterProvider] (default: the global provider).
// Keys, owner tokens and fencing tokens are never attributes and never logged.
package leader
