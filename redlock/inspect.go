package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Inspection is what [Group.Inspect] reports about one lock at one instant: each node's view and the
// quorum's. It never carries an owner token. Its zero value describes a lock that no node holds.
type Inspection struct {
	// Exists reports whether one owner holds the lock on at least [Group.Quorum] nodes, that is whether
	// the lock is held by the quorum's view.
	Exists bool
	// Remaining is how long the quorum's view lasts without a renewal: the Quorum()-th longest
	// remaining life among the nodes holding that owner's token; 0 when not Exists or NoExpiry.
	Remaining time.Duration
	// NoExpiry is true when at least a quorum of those nodes hold it without expiry (redlock never
	// writes such a key).
	NoExpiry bool
	// FencingToken is the highest fence counter among the nodes that answered: the last fencing token
	// issued as far as they know (the next acquisition gets a higher one). 0 without [WithFencing] or
	// when no node has a counter.
	FencingToken int64
	// Nodes holds one row per node, in the order of the clients given to [NewGroup].
	Nodes []NodeInspection
}

// NodeInspection is one node's answer in an [Inspection].
type NodeInspection struct {
	// Index is the node's position in the clients given to [NewGroup]; Addr its address, or "".
	Index int
	Addr  string
	// Exists reports whether the lock key exists on the node (some owner's token, not necessarily the
	// quorum's).
	Exists bool
	// Remaining is the lock key's remaining life on the node (PTTL, millisecond resolution); 0 when not
	// Exists or NoExpiry.
	Remaining time.Duration
	// NoExpiry is true for a lock key without expiry (which redlock never writes).
	NoExpiry bool
	// FencingToken is the node's fence counter in fenced mode; 0 when absent or unfenced.
	FencingToken int64
	// Err is the node's failure (a timeout wrapped with [ErrUncertain], a server error, or
	// [ErrForeignData] when a key holds data redlock never writes); the other fields are then zero.
	Err error

	owner string // SHA-1 of the owner token: which nodes hold the same owner
}

// Inspect reads the lock at name (after the key prefix) on every node without changing it: one
// read-only script per node (EVALSHA_RO: the lock key's existence, PTTL and a digest of its owner
// token, and in fenced mode the fence counter), sent in parallel and bounded by the node timeout like
// every step. Nothing is written; owner tokens are never returned (nodes are matched by a digest).
//
// It returns the Inspection when at least [Group.Quorum] nodes answered, each failing node's error in
// its row. Otherwise it returns an error wrapping a [*QuorumError] (Op "inspect") with every node's
// error. It fails before any I/O with an error matching [ErrInvalidConfig] for an empty name, and with
// ctx's error when ctx is already done. It blocks for at most about one node timeout. Safe for
// concurrent use. With [WithHooks] it is the operation REDLOCK INSPECT; a rejection is returned
// unchanged with nothing read.
func (g *Group) Inspect(ctx context.Context, name string) (Inspection, error) {
	ctx, sc, err := g.own.Begin(ctx, "INSPECT")
	if err != nil {
		return Inspection{}, err
	}
	in, err := g.inspect(ctx, name)
	sc.End(err)
	return in, err
}

func (g *Group) inspect(ctx context.Context, name string) (Inspection, error) {
	if err := luakit.ValidateKey("lock key", name); err != nil {
		return Inspection{}, fmt.Errorf("redlock: %w", err)
	}
	keys := []string{g.cfg.keys.Key(name)}
	if g.cfg.fenced {
		keys = append(keys, g.cfg.keys.Key(g.cfg.fenceKey))
	}
	if err := ctx.Err(); err != nil {
		return Inspection{}, fmt.Errorf("redlock: inspect: %w", err)
	}
	res, _ := g.fanout(ctx, nil, nil, func(ctx context.Context, i int) rueidis.RedisResult {
		return inspectScript.Exec(ctx, g.clients[i], keys, nil)
	})
	in := Inspection{Nodes: make([]NodeInspection, len(g.clients))}
	var fails []NodeError
	for i, r := range res {
		row, err := decodeInspect(r.msg, r.err)
		if err != nil {
			ne := g.nodeError(i, err)
			fails = append(fails, ne)
			in.Nodes[i] = NodeInspection{Index: i, Addr: ne.Addr, Err: ne.Err}
			continue
		}
		row.Index, row.Addr = i, nodeAddr(g.clients[i])
		in.Nodes[i] = row
		in.FencingToken = max(in.FencingToken, row.FencingToken)
	}
	if answered := len(g.clients) - len(fails); answered < g.quorum {
		return Inspection{}, fmt.Errorf("redlock: inspect: %w", &QuorumError{Op: "inspect", Needed: g.quorum, Got: answered, Nodes: fails})
	}
	in.quorumView(g.quorum)
	return in, nil
}

// quorumView sets Exists, Remaining and NoExpiry from the rows: the owner held on the most nodes, if
// that is at least quorum nodes, and the quorum-th longest life among them (no expiry counts longest).
func (in *Inspection) quorumView(quorum int) {
	byOwner := map[string][]NodeInspection{}
	for _, n := range in.Nodes {
		if n.Err == nil && n.Exists {
			byOwner[n.owner] = append(byOwner[n.owner], n)
		}
	}
	for _, rows := range byOwner {
		if len(rows) < quorum {
			continue
		}
		slices.SortFunc(rows, func(a, b NodeInspection) int {
			if a.NoExpiry != b.NoExpiry {
				if a.NoExpiry {
					return -1
				}
				return 1
			}
			return cmp.Compare(b.Remaining, a.Remaining)
		})
		q := rows[quorum-1]
		in.Exists, in.Remaining, in.NoExpiry = true, q.Remaining, q.NoExpiry
		return // at most one owner can hold a majority
	}
}

// decodeInspect decodes one node's inspect.lua status row (or its error): {status, pttl, owner, fence}.
func decodeInspect(msg rueidis.RedisMessage, replyErr error) (NodeInspection, error) {
	if replyErr != nil {
		return NodeInspection{}, luakit.MarkForeign(replyErr)
	}
	arr, err := msg.ToArray()
	if err != nil {
		return NodeInspection{}, err
	}
	if len(arr) != 4 {
		return NodeInspection{}, fmt.Errorf("unexpected inspect reply of %d elements", len(arr))
	}
	held, err := arr[0].AsInt64()
	if err != nil {
		return NodeInspection{}, fmt.Errorf("inspect: held: %w", err)
	}
	switch held {
	case luakit.StatusForeign:
		return NodeInspection{}, fmt.Errorf("%w (a key holds another Redis type)", ErrForeignData)
	case luakit.StatusOK, luakit.StatusAbsent:
	default:
		return NodeInspection{}, fmt.Errorf("unexpected inspect status %d", held)
	}
	pttl, err := arr[1].AsInt64()
	if err != nil {
		return NodeInspection{}, fmt.Errorf("inspect: pttl: %w", err)
	}
	owner, err := arr[2].ToString()
	if err != nil {
		return NodeInspection{}, fmt.Errorf("inspect: owner: %w", err)
	}
	fence, err := arr[3].ToString()
	if err != nil {
		return NodeInspection{}, fmt.Errorf("inspect: fence: %w", err)
	}
	var n NodeInspection
	if fence != "" {
		v, perr := luakit.ParseInt64(fence)
		if perr != nil || v < 0 {
			return NodeInspection{}, fmt.Errorf("%w (the fence key is not a non-negative decimal int64)", ErrForeignData)
		}
		n.FencingToken = v
	}
	if held == luakit.StatusOK {
		n.Exists, n.owner = true, owner
		if pttl >= 0 {
			n.Remaining = time.Duration(pttl) * time.Millisecond
		} else {
			n.NoExpiry = true
		}
	}
	return n, nil
}
