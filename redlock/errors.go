package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors are luakit's shared values (redlock.ErrLost == luakit.ErrLost), so one errors.Is
// check works whichever Coordkit primitive returned the error. What each means for every handle is
// the contract in package github.com/coordkit/coordkit/luakit/ownership; the comments say what it
// means here. Most are returned wrapped with a "redlock: " prefix and detail.
var (
	ErrNoPermission     = luakit.ErrNoPermission     // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrNotAcquired      = luakit.ErrNotAcquired      // wrapped by every failed TryAcquire; the attempt was cleaned up on every node
	ErrLateReply        = luakit.ErrLateReply        // a majority granted, but no validity was left after the elapsed time and drift
	ErrUncertain        = luakit.ErrUncertain        // some node gave no reply: its state is unknown
	ErrLost             = luakit.ErrLost             // a Lease's cause: the nodes without its token leave no quorum possible
	ErrExpired          = luakit.ErrExpired          // a Lease's cause: its validity elapsed without a confirmed renewal
	ErrReleased         = luakit.ErrReleased         // a Lease's cause: a release (Release or Close) was sent
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Lease
	ErrInvalidTTL       = luakit.ErrInvalidTTL       // a TTL under 1ms or not above the drift allowance, before any I/O
)

// The other conditions every Coordkit module shares, as redlock returns them.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument (clients, keys, TTL), before any I/O
	ErrForeignData   = luakit.ErrForeignData   // a node's *CounterError whose fence key holds another type or a value redlock never writes
	ErrNilClient     = luakit.ErrNilClient     // NewGroup was given a nil client
)

// Sentinel errors of this package. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrNoQuorum is wrapped by every [*QuorumError]: fewer than a majority of nodes confirmed the step.
	ErrNoQuorum = errors.New("redlock: no quorum")

	// ErrHeld is a per-node error ([NodeError].Err): another owner holds the lock on that node.
	ErrHeld = errors.New("redlock: held by another owner on this node")

	// ErrNotOwner is a per-node error of an extend, verify or fence step: this owner's token is not on
	// the node (it expired, was deleted, or the node restarted empty).
	ErrNotOwner = errors.New("redlock: owner token not present on this node")

	// ErrQuarantined is a per-node error of an acquisition ([NodeError].Err): the node granted the lock,
	// but its server has been up for less than the restart quarantine ([WithRestartQuarantine]), so the
	// grant does not count towards the quorum. The node holds the attempt's token (a failed attempt
	// deletes it; a successful one keeps it there). The error's message says how much of the
	// quarantine is left.
	ErrQuarantined = errors.New("redlock: node in restart quarantine; its grant does not count")

	// ErrCounter is wrapped by every [*CounterError]: a fence counter cannot issue a fencing token
	// (luakit's value, shared with the other fenced modules).
	ErrCounter = luakit.ErrCounter

	// ErrSameKey is returned, before any I/O, when a lock key equals the fence key. It matches
	// [ErrInvalidConfig].
	ErrSameKey = luakit.ConfigSentinel("redlock: lock key and fence key must differ")

	// ErrNodeCount is returned by [NewGroup] unless the number of clients is odd and at least 3. It
	// matches [ErrInvalidConfig].
	ErrNodeCount = luakit.ConfigSentinel("redlock: need an odd number of at least 3 clients")

	// ErrClusterClient is returned by [NewGroup] for a Redis Cluster client: each node must be an
	// independent standalone deployment. It matches [ErrInvalidConfig].
	ErrClusterClient = luakit.ConfigSentinel("redlock: cluster clients are not supported; use one standalone client per deployment")

	// ErrDuplicateClient is returned by [NewGroup] when the same client value appears twice. It matches
	// [ErrInvalidConfig].
	ErrDuplicateClient = luakit.ConfigSentinel("redlock: the same client appears twice")
)

// lateError is a [Group.TryAcquire] attempt that a majority granted too late (see [ErrLateReply]).
type lateError struct {
	ttl, elapsed, drift time.Duration
}

func (e *lateError) Error() string {
	return fmt.Sprintf("redlock: acquire: not acquired: the majority's replies left no validity (ttl %v, elapsed %v, drift allowance %v)",
		e.ttl, e.elapsed, e.drift)
}

// Unwrap returns [ErrNotAcquired] and [ErrLateReply].
func (e *lateError) Unwrap() []error { return []error{ErrNotAcquired, ErrLateReply} }

// quarantinedError is a node's [ErrQuarantined] with what is left of its quarantine.
type quarantinedError struct{ left time.Duration }

func (e *quarantinedError) Error() string {
	return fmt.Sprintf("%v (%v left)", ErrQuarantined, e.left.Round(time.Millisecond))
}

// Unwrap returns [ErrQuarantined].
func (e *quarantinedError) Unwrap() error { return ErrQuarantined }

// NodeError is the failure of one node in one step.
type NodeError struct {
	// Index is the node's position in the clients given to [NewGroup].
	Index int
	// Addr is the node's address as the client reports it (host:port), or "" when unknown.
	Addr string
	// Err is what failed: [ErrHeld], [ErrQuarantined], [ErrNotOwner], a [*CounterError], a server
	// error reply, or a transport error wrapped with [ErrUncertain] (context.DeadlineExceeded after the
	// node timeout).
	Err error
}

// Error returns "node <index> (<addr>): <err>"; it never contains keys or tokens.
func (e NodeError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("node %d (%s): %v", e.Index, e.Addr, e.Err)
	}
	return fmt.Sprintf("node %d: %v", e.Index, e.Err)
}

// Unwrap returns Err.
func (e NodeError) Unwrap() error { return e.Err }

// QuorumError reports a step that no quorum settled. For "acquire" fewer than a majority of nodes
// granted the lock outside restart quarantine, and for "fence" fewer than [Group.FencedQuorum] nodes
// both granted it and stored the new fencing token (both then wrap [ErrNotAcquired]); for "extend" and "verify" neither a majority
// confirmed nor enough nodes refused to rule a majority out; for "release" fewer than a majority
// replied. The last three leave the lock's state unknown, so they wrap [ErrUncertain]; for "inspect"
// fewer than a majority answered [Group.Inspect] (nothing was written). Every
// QuorumError wraps [ErrNoQuorum] and each node's error, so errors.Is finds, for example, [ErrHeld] or
// context.DeadlineExceeded when any node failed that way.
type QuorumError struct {
	// Op is the step: "acquire", "fence" (fenced mode's token write), "extend", "verify", "release" or
	// "inspect".
	Op string
	// Needed is the quorum, len(clients)/2 + 1, or for "fence" the fenced quorum, len(clients)/2 + 2.
	Needed int
	// Got is how many nodes confirmed the step (granted the lock outside quarantine; for "fence",
	// granted it and stored the token, or only granted it when too few did for the token to be sent;
	// extended; still held the token; or replied to the release).
	Got int
	// Nodes lists every node that did not confirm, in index order.
	Nodes []NodeError
}

// Error gives the counts and every failing node ("no quorum: 2 of 3 needed nodes confirmed: node 2
// (addr): ..."); the error that wraps it names the package and the step. It never contains keys or
// tokens.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no quorum: %d of %d needed nodes confirmed", e.Got, e.Needed)
	if len(e.Nodes) > 0 {
		b.WriteString(": ")
		writeNodeErrors(&b, e.Nodes)
	}
	return b.String()
}

// writeNodeErrors writes each node's error, separated by "; ".
func writeNodeErrors(b *strings.Builder, nodes []NodeError) {
	for i, n := range nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n.Error())
	}
}

// Unwrap returns [ErrNoQuorum]; [ErrNotAcquired] for "acquire" and "fence"; [ErrUncertain] for
// "extend", "verify" and "release"; and each node's error.
func (e *QuorumError) Unwrap() []error {
	out := make([]error, 0, len(e.Nodes)+2)
	out = append(out, ErrNoQuorum)
	switch e.Op {
	case "acquire", "fence":
		out = append(out, ErrNotAcquired)
	case "extend", "verify", "release":
		out = append(out, ErrUncertain)
	}
	for _, n := range e.Nodes {
		out = append(out, n)
	}
	return out
}

// CounterReason says why a fence counter cannot issue a token: luakit's type, shared with the other
// fenced modules.
type CounterReason = luakit.CounterReason

// The reasons a fence counter is rejected (luakit's values). The acquisition wrote nothing.
const (
	CounterExpiring  = luakit.CounterExpiring  // the counter key has a TTL
	CounterNegative  = luakit.CounterNegative  // the counter holds a negative integer
	CounterMalformed = luakit.CounterMalformed // the counter holds something other than a decimal int64
	CounterOverflow  = luakit.CounterOverflow  // the counter is at the int64 maximum
	CounterWrongType = luakit.CounterWrongType // the counter key holds a non-string type
)

// CounterError reports a fence counter that cannot issue a fencing token: luakit's type, so errors.As
// with lock's and redlock's CounterError finds the same errors. It wraps [ErrCounter]; with reason
// [CounterWrongType], [CounterMalformed] or [CounterNegative] it also matches [ErrForeignData].
type CounterError = luakit.CounterError
