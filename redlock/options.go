package redlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Group]. Options are applied in order by [NewGroup]; an invalid value makes
// NewGroup fail. A nil Option is ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys          luakit.Keyspace
	nodeTimeout   time.Duration
	cleanup       time.Duration // WithCleanupTimeout; 0: the node timeout
	driftFactor   float64
	retryDelay    time.Duration
	renewFraction float64
	fenceKey      string // logical name; "" when fencing is off
	fenced        bool
	logger        *slog.Logger
	quarantine    bool          // restart quarantine on (the default)
	longestTTL    time.Duration // WithLongestTTL: floor of the quarantine period; 0 = learned only
	hooks         luakit.Hooks
	instance      string
	ack           luakit.ReplicaAck // WithReplicaAck
}

// Defaults. The drift allowance and the retry delay follow the Redis distributed-locks document.
const (
	// DefaultNodeTimeout is the default per-node bound of every operation ([WithNodeTimeout]).
	DefaultNodeTimeout = time.Second
	// DefaultDriftFactor is the default clock-drift allowance as a fraction of the TTL
	// ([WithDriftFactor]).
	DefaultDriftFactor = 0.01
	// DriftConstant is added to TTL × drift factor to form the drift allowance: 2ms, the Redis
	// document's allowance for the server's expiry precision.
	DriftConstant = 2 * time.Millisecond
	// DefaultRetryDelay is the default mean delay between [Group.Acquire] attempts ([WithRetryDelay]).
	DefaultRetryDelay = 200 * time.Millisecond
	// DefaultRenewFraction is the default fraction of the TTL after which [Lease.KeepAlive] renews
	// ([WithRenewFraction]).
	DefaultRenewFraction = 1.0 / 3
)

// cleanupTimeout is the bound of the group's own cleanups: [WithCleanupTimeout], else the node timeout.
func (c *config) cleanupTimeout() time.Duration {
	if c.cleanup > 0 {
		return c.cleanup
	}
	return c.nodeTimeout
}

func defaultConfig() config {
	return config{
		nodeTimeout:   DefaultNodeTimeout,
		driftFactor:   DefaultDriftFactor,
		retryDelay:    DefaultRetryDelay,
		renewFraction: DefaultRenewFraction,
		logger:        slog.Default(),
		quarantine:    true,
	}
}

// WithNodeTimeout bounds every per-node command (acquire, fence, extend, verify, release, cleanup): a
// node that has not replied within d counts as failed for that step. It must be positive and should be
// small compared with the lock TTL, since an acquisition can wait up to d (plus d for the fence step in
// fenced mode). Default: 1s ([DefaultNodeTimeout]).
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("redlock", "node timeout %v must be positive", d)
		}
		c.nodeTimeout = d
		return nil
	})
}

// WithCleanupTimeout bounds each owner-checked cleanup the group sends on its own (after a failed,
// late or unfenced acquisition, or a renewal that found the lease lost), as in every module; each
// node's command is also bounded by the node timeout, so the smaller bound applies. [Lease.Close] is
// one Release, which runs to the node timeout once sent. It must be positive. Default: the node
// timeout ([WithNodeTimeout]).
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("redlock", "cleanup timeout %v must be positive", d)
		}
		c.cleanup = d
		return nil
	})
}

// WithDriftFactor sets the clock-drift allowance: a lock's validity is TTL − elapsed − (TTL × f + 2ms).
// f must be in [0, 0.5). Default: 0.01 ([DefaultDriftFactor]).
func WithDriftFactor(f float64) Option {
	return optionFunc(func(c *config) error {
		if !(f >= 0 && f < 0.5) {
			return luakit.InvalidConfig("redlock", "drift factor %v outside [0, 0.5)", f)
		}
		c.driftFactor = f
		return nil
	})
}

// WithRetryDelay sets the mean delay between attempts of [Group.Acquire]; each delay is drawn uniformly
// from [d/2, 3d/2) so that contenders desynchronise, as the Redis document recommends. It is also how
// long [Lease.KeepAlive] waits after a failed or uncertain renewal before trying again (capped at a
// quarter of the renew period). It must be positive. Default: 200ms ([DefaultRetryDelay]).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("redlock", "retry delay %v must be positive", d)
		}
		c.retryDelay = d
		return nil
	})
}

// WithRenewFraction sets when [Lease.KeepAlive] renews: every fraction × TTL. It must be in [0.05, 0.9]
// (at most 20 renewals per TTL).
// Default: 1/3 ([DefaultRenewFraction]), so two renewals can fail before the validity ends.
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error {
		if !(fraction >= 0.05 && fraction <= 0.9) {
			return luakit.InvalidConfig("redlock", "renew fraction %v outside [0.05, 0.9]", fraction)
		}
		c.renewFraction = fraction
		return nil
	})
}

// WithKeyPrefix prepends prefix to every physical key (lock keys and the fence key) on every node. The
// prefix is binary-safe. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithFencing enables fenced mode: every node keeps a persistent counter at fenceKey (after the key
// prefix), and each acquisition issues a fencing token (see [Lease.FencingToken] and the package
// documentation for exactly what the token guarantees). One counter serves every lock key of the
// group. fenceKey must be non-empty and must never be used as a lock key. Default: unfenced
// (FencingToken returns 0).
func WithFencing(fenceKey string) Option {
	return optionFunc(func(c *config) error {
		if err := luakit.ValidateKey("fence key", fenceKey); err != nil {
			return fmt.Errorf("redlock: %w", err) // matches ErrInvalidConfig and luakit.ErrEmptyKey
		}
		c.fenceKey = fenceKey
		c.fenced = true
		return nil
	})
}

// WithLogger sets the logger for warnings: an owner-checked cleanup (after a failed acquire or fence
// step, or a renewal that found the lock lost) left unconfirmed on a node that may hold the token
// (one that granted it, or whose earlier reply never came) carries op, replied and nodes (counts) and
// failed (each such node's index, address and error, "; "-separated); a cleanup after a late
// acquisition or renewal that no quorum answered, and a failed background renewal of
// [Lease.KeepAlive], carry the error; a node put in restart quarantine is logged once per restart
// (per server run_id) with its address, the quarantine and how much of it is left. Keys, owner tokens
// and fencing tokens are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	})
}

// WithRestartQuarantine turns the restart quarantine on (the default) or off.
//
// While it is on, every acquisition script also reads the node's INFO server section (run_id and
// uptime_in_seconds, inside the same script: no extra round trip), and a node whose server has been
// up for less than the quarantine period grants locks that do not count towards the quorum (its
// [NodeError] wraps [ErrQuarantined]). The period is the longest TTL this group has requested
// (TryAcquire, Acquire, ExtendTTL), raised to [WithLongestTTL]'s value if that is longer: a restarted
// node may have forgotten a lock of any holder, which lasts at most that long. See the package
// documentation ("Restart quarantine") for the cost. Turn it off only when every node persists every
// write before replying (AOF with appendfsync always) or the user the clients log in as may not run
// INFO (the acquisition then fails on that node with the server's NOPERM error).
func WithRestartQuarantine(on bool) Option {
	return optionFunc(func(c *config) error {
		c.quarantine = on
		return nil
	})
}

// WithLongestTTL sets the shortest restart quarantine ([WithRestartQuarantine]): the longest TTL that
// any client, in any process, uses for locks on these nodes. A group learns only the TTLs it requests
// itself, so set it when other groups or processes use longer TTLs than this one. d must be at least
// 0; 0 (the default) means the group's own longest requested TTL alone decides. It has no effect
// while the quarantine is off.
func WithLongestTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return luakit.InvalidConfig("redlock", "longest TTL %v must not be negative", d)
		}
		c.longestTTL = d
		return nil
	})
}

// WithHooks adds hooks that admit and observe the group's operations (see [luakit.Hook]), once per
// group operation and before any node is contacted, in the order given: REDLOCK TRY ACQUIRE,
// REDLOCK ACQUIRE (one operation however many attempts it makes), REDLOCK INSPECT, and on each Lease
// REDLOCK EXTEND (Extend, ExtendTTL, each keep-alive renewal), REDLOCK VERIFY, REDLOCK RELEASE and REDLOCK CLOSE. A
// rejected renewal or release keeps the lock on every node; a rejected Close returns the hook's error
// and can be retried; the cleanup releases after a failed attempt are part of that attempt and are
// not admitted again. No majority (ErrNotAcquired) completes as [luakit.OutcomeSucceeded]. Default:
// none.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels the group for hooks ([luakit.Operation].Instance). It must not be a key, a token or
// an endpoint. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.instance = instance; return nil })
}

// WithReplicaAck makes every node's acquisition, fencing-counter step and renewal wait for an
// acknowledgement from that node's replicas (WAIT) or of append-only-file fsyncs (WAITAOF), as ack
// says (see [luakit.ReplicaAck]), pipelined behind the node's script on the same connection: for
// nodes that are Sentinel-managed primaries with replicas, so that a node's failover keeps the grants
// it acknowledged. A node whose write is not acknowledged in time counts as not granting (its
// NodeError matches [luakit.ErrNotAcknowledged]; the token is deleted there like any uncertain
// node's), so the quorum counts only acknowledged nodes. ack.Timeout must be below the node timeout.
// What this guarantees and what it does not: docs/replica-ack.md. The zero value turns it off; an
// invalid value makes NewGroup fail with an error matching [luakit.ErrInvalidConfig]. Default: off.
func WithReplicaAck(ack luakit.ReplicaAck) Option {
	return optionFunc(func(c *config) error {
		if err := ack.Validate("redlock"); err != nil {
			return err
		}
		c.ack = ack
		return nil
	})
}
