package idempotency

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Option configures a [Store]. Options are applied in order by [New]; invalid values make New fail
// with an error matching luakit.ErrInvalidConfig. A nil Option is ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys     luakit.Keyspace
	tracker  *luakit.Tracker
	own      ownership.Config // name, retry delay and logger of Begin's waiting and of KeepAlive
	hooks    luakit.Hooks     // WithHooks
	instance string           // WithInstance
}

func defaultConfig() config {
	return config{own: ownership.Config{Name: "idempotency", RetryDelay: 50 * time.Millisecond}}
}

// WithKeyPrefix prepends prefix to every physical key, like a prefixed client view. The prefix is
// binary-safe. On Cluster a prefix containing a hash tag ({...}) puts every key in that tag's slot.
// Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithTracker sets the tracker [Store.Begin] wakes on; it must be wired into the client's
// ClientOption.OnInvalidations. Default (or nil): [luakit.TrackerOf] the client, so a client from
// [luakit.NewTrackedClient] needs no option. Without working tracking (no tracker, RESP2,
// DisableCache) Begin logs one warning per Store and wakes only when the awaited claim's lease would
// end (see [ownership.Waiter]).
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithRetryDelay sets how long [Store.Begin] waits before retrying after a transient server error
// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY: replies that say the script did not
// run; or a refused connection), and how long [Claim.KeepAlive] waits after a failed renewal (at most
// a quarter of its period). Uncertain failures of Begin are never retried. It must be positive.
// Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for the warning that [Store.Begin] waits without invalidations (logged
// once per Store); keys, tokens and results are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

// WithHooks adds hooks that admit and observe the Store's operations (see [luakit.Hook]; primitive
// "idempotency"): IDEMPOTENCY TRY BEGIN (TryBegin), IDEMPOTENCY BEGIN (Begin: one operation however
// many re-reads and retries it waits through), IDEMPOTENCY COMPLETE, IDEMPOTENCY EXTEND (Extend and
// each renewal a [Claim.KeepAlive] sends, admitted with the keep-alive's context; a rejected renewal
// is handled like a failed one and retried after the retry delay), IDEMPOTENCY ABANDON,
// IDEMPOTENCY FORCE ABANDON and IDEMPOTENCY INSPECT. A rejected admission returns the hook's error
// unchanged and sends nothing. A negative answer (a claim held by another, a lost claim: false
// results, or an Attempt in progress or mismatched) completes as [luakit.OutcomeSucceeded]. KeepAlive
// itself is not an operation. Hooks compose in order across calls. Default: none, and operations then
// allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels this Store for hooks ([luakit.Operation].Instance), so several Stores in one process
// stay apart. It must not be a key or a token. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.instance = instance; return nil })
}

// The operation names of the Store's hooks ([WithHooks]).
const (
	opTryBegin     = "IDEMPOTENCY TRY BEGIN"
	opBegin        = "IDEMPOTENCY BEGIN"
	opComplete     = "IDEMPOTENCY COMPLETE"
	opExtend       = "IDEMPOTENCY EXTEND"
	opAbandon      = "IDEMPOTENCY ABANDON"
	opForceAbandon = "IDEMPOTENCY FORCE ABANDON"
	opInspect      = "IDEMPOTENCY INSPECT"
)

// op is the hook operation name for this Store.
func (s *Store) op(name string) luakit.Operation {
	return luakit.Operation{Primitive: "idempotency", Name: name, Instance: s.cfg.instance}
}

// WithReplicaAck makes every claim (TryBegin, Begin) and every completion (Complete) wait for an
// acknowledgement from replicas (WAIT) or of append-only-file fsyncs (WAITAOF), as ack says (see
// [luakit.ReplicaAck]), in the same round trip (on a Cluster on a dedicated connection), so that a failover that promotes an acknowledging
// replica keeps them. A claim that is not acknowledged in time is not granted: it is abandoned
// (owner-checked, bounded by 1s) and the call returns an error matching [luakit.ErrNotAcknowledged] (a
// [*luakit.AckError] that says how many replicas acknowledged). A completion that is not acknowledged
// returns (false, error matching both luakit.ErrNotAcknowledged and [ErrUncertain]): the result is
// stored on the primary and may not survive a failover; check with TryBegin or Inspect. A renewal
// (Extend, each KeepAlive round) waits for it in the same round trip too, and one that is not
// acknowledged returns (false, error matching luakit.ErrNotAcknowledged and ErrUncertain), so the
// claim's Deadline is not moved. Abandon is not acknowledged. What this guarantees and what it does not: docs/replica-ack.md. The zero value
// turns it off; an invalid value makes New fail with an error matching [luakit.ErrInvalidConfig].
// Default: off.
func WithReplicaAck(ack luakit.ReplicaAck) Option {
	return optionFunc(func(c *config) error { return c.own.SetReplicaAck(ack) })
}
