package redlock

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrNotAcquired is wrapped by every failed [Group.TryAcquire] (a [*QuorumError] with Op "acquire"
	// or "fence", or an [ErrNoValidity] failure). The attempt was cleaned up: an owner-checked delete was
	// sent to every node, including nodes that failed or timed out.
	ErrNotAcquired = errors.New("redlock: lock not acquired")

	// ErrNoQuorum is wrapped by every [*QuorumError]: fewer than a majority of nodes confirmed the step.
	ErrNoQuorum = errors.New("redlock: no quorum")

	// ErrNoValidity is returned (with [ErrNotAcquired]) when a majority granted the lock but the time the
	// attempt took plus the drift allowance used up the whole TTL, so no validity was left; and by
	// [Lock.Renew] in the same situation. The lock was removed best-effort from every node.
	ErrNoValidity = errors.New("redlock: no validity left after elapsed time and clock drift")

	// ErrHeld is a per-node error ([NodeError].Err): another owner holds the lock on that node.
	ErrHeld = errors.New("redlock: held by another owner on this node")

	// ErrNotOwner is a per-node error of a renewal or fence step: this owner's token is no longer on the
	// node (it expired, was deleted, or the node restarted empty).
	ErrNotOwner = errors.New("redlock: owner token not present on this node")

	// ErrUncertain wraps per-node failures where a command may have reached the node but no reply was
	// read (timeout, cancellation, broken connection): the node's state is unknown.
	ErrUncertain = errors.New("redlock: node outcome uncertain")

	// ErrCounter is wrapped by every [*CounterError]: a node's fence counter cannot issue a token.
	ErrCounter = errors.New("redlock: fence counter cannot issue a token")

	// ErrInvalidTTL is returned, before any I/O, for a TTL shorter than one millisecond or not greater
	// than the drift allowance (TTL × drift factor + 2ms).
	ErrInvalidTTL = errors.New("redlock: TTL must be at least 1ms and exceed the drift allowance")

	// ErrSameKey is returned, before any I/O, when a lock key equals the fence key.
	ErrSameKey = errors.New("redlock: lock key and fence key must differ")

	// ErrNodeCount is returned by [NewGroup] unless the number of clients is odd and at least 3.
	ErrNodeCount = errors.New("redlock: need an odd number of at least 3 clients")

	// ErrNilClient is returned by [NewGroup] for a nil client.
	ErrNilClient = errors.New("redlock: nil rueidis client")

	// ErrClusterClient is returned by [NewGroup] for a Redis Cluster client: each node must be an
	// independent standalone deployment.
	ErrClusterClient = errors.New("redlock: cluster clients are not supported; use one standalone client per deployment")

	// ErrDuplicateClient is returned by [NewGroup] when the same client value appears twice.
	ErrDuplicateClient = errors.New("redlock: the same client appears twice")

	// ErrReleased is the cause reported by [Lock.Err] after [Lock.Release] or [Lock.Close] (whatever
	// their outcome: a release that no quorum confirmed still ends the handle's ownership).
	ErrReleased = errors.New("redlock: lock released")

	// ErrExpired is the cause reported by [Lock.Err] once the validity estimate elapsed without a
	// confirmed renewal.
	ErrExpired = errors.New("redlock: lock validity elapsed")

	// ErrLost is the cause reported by [Lock.Err] after a renewal that no quorum confirmed.
	ErrLost = errors.New("redlock: lock lost (renewal not confirmed by a quorum)")
)

// NodeError is the failure of one node in one step.
type NodeError struct {
	// Index is the node's position in the clients given to [NewGroup].
	Index int
	// Addr is the node's address as the client reports it (host:port), or "" when unknown.
	Addr string
	// Err is what failed: [ErrHeld], [ErrNotOwner], a [*CounterError], a server error reply, or a
	// transport error wrapped with [ErrUncertain] (context.DeadlineExceeded after the node timeout).
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

// QuorumError reports a step that fewer than a majority of nodes confirmed. It wraps [ErrNoQuorum]
// (and [ErrNotAcquired] for Op "acquire" and "fence") and every node's error, so errors.Is finds, for
// example, [ErrHeld], [ErrUncertain] or context.DeadlineExceeded when any node failed that way.
type QuorumError struct {
	// Op is the step: "acquire", "fence" (fenced mode's token write), "renew" or "release".
	Op string
	// Needed is the quorum: len(clients)/2 + 1.
	Needed int
	// Got is how many nodes confirmed the step (acquired, fenced, renewed, or replied to the release).
	Got int
	// Nodes lists every node that did not confirm, in index order.
	Nodes []NodeError
}

// Error names the step, the counts and every failing node.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s: %d of %d needed nodes confirmed", e.Op, e.Got, e.Needed)
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

// Unwrap returns [ErrNoQuorum], [ErrNotAcquired] for an acquisition, and each node's error.
func (e *QuorumError) Unwrap() []error {
	out := make([]error, 0, len(e.Nodes)+2)
	out = append(out, ErrNoQuorum)
	if e.Op == "acquire" || e.Op == "fence" {
		out = append(out, ErrNotAcquired)
	}
	for _, n := range e.Nodes {
		out = append(out, n)
	}
	return out
}

// CounterReason says why a node's fence counter cannot issue a token.
type CounterReason string

// The reasons a fence counter is rejected. The node that reported it wrote nothing.
const (
	// CounterWrongType: the fence key holds a non-string Redis type.
	CounterWrongType CounterReason = "wrongtype"
	// CounterExpiring: the fence key has a TTL; a counter that can expire can reissue old tokens.
	CounterExpiring CounterReason = "expiring"
	// CounterMalformed: the fence key holds something other than a decimal int64.
	CounterMalformed CounterReason = "malformed"
	// CounterNegative: the fence key holds a negative integer.
	CounterNegative CounterReason = "negative"
	// CounterOverflow: the highest counter is 9223372036854775807; the next token would overflow.
	CounterOverflow CounterReason = "overflow"
)

// CounterError reports a fence counter that cannot issue a fencing token. It wraps [ErrCounter].
type CounterError struct {
	Reason CounterReason
}

// Error names the reason.
func (e *CounterError) Error() string {
	return fmt.Sprintf("redlock: fence counter unusable (%s)", string(e.Reason))
}

// Unwrap returns [ErrCounter].
func (e *CounterError) Unwrap() error { return ErrCounter }
