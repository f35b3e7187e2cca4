package denylist

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Inspection is a read-only view of a deny list's set in the server, taken by [List.Inspect].
type Inspection struct {
	// Exists reports whether the key exists (an empty set does not: the server removes it).
	Exists bool
	// Identities are the denied identities, byte for byte, in byte-wise ascending order; nil when the
	// key does not exist.
	Identities []string
	// Remaining is how long the key has left to live; 0 when it does not exist or has no expiry.
	Remaining time.Duration
	// NoExpiry reports a key without expiry (the package never sets one: membership persists until
	// removed). Remaining is 0 then.
	NoExpiry bool
}

// Inspect reads the set from the server in one read-only script (one round trip, EVALSHA_RO; SMEMBERS
// and PTTL, O(N) for N members). It writes nothing, changes no TTL, and neither reads nor fills the
// cache. It blocks until the reply or until ctx ends. Errors: [ErrClosed] after Close;
// [ErrForeignData] when the key holds another type; the context's error or a server error, wrapped
// with a "ratelimit: " prefix. Safe for concurrent use.
func (d *List) Inspect(ctx context.Context) (Inspection, error) {
	ctx, sc, err := d.cfg.hooks.Begin(ctx, op(opInspect, d.cfg.instance))
	if err != nil {
		return Inspection{}, err
	}
	ins, err := d.inspect(ctx)
	sc.End(err)
	return ins, err
}

func (d *List) inspect(ctx context.Context) (Inspection, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return Inspection{}, errClosed
	}
	if err := ctx.Err(); err != nil {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: %w", err)
	}
	rctx, stop := luakit.WithoutDeadline(ctx)
	arr, err := inspectScript.Exec(rctx, d.client, []string{d.key}, nil).ToArray()
	stop()
	if err != nil {
		if isWrongType(err) {
			return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: %w: %w", ErrForeignData, err)
		}
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: %w", err)
	}
	return decodeInspection(arr)
}

// decodeInspection decodes the reply of denylist_entries: {1, pttl, {members}}.
func decodeInspection(arr []rueidis.RedisMessage) (Inspection, error) {
	if len(arr) != 3 {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: reply has %d elements, want 3", len(arr))
	}
	if st, err := arr[0].AsInt64(); err != nil || st != luakit.StatusOK {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: unexpected status")
	}
	arr = arr[1:]
	pttl, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: pttl: %w", err)
	}
	members, err := arr[1].AsStrSlice()
	if err != nil {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: members: %w", err)
	}
	return inspectionOf(pttl, members)
}

// maxMillis is the largest PTTL (ms) a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / int64(time.Millisecond))

// inspectionOf checks the key's PTTL (ms; -1 no expiry, -2 absent) and sorts the members.
func inspectionOf(pttl int64, members []string) (Inspection, error) {
	if pttl < -2 || pttl > maxMillis {
		return Inspection{}, fmt.Errorf("ratelimit: deny-list inspect: pttl %d", pttl)
	}
	if pttl == -2 || len(members) == 0 {
		return Inspection{}, nil
	}
	sort.Strings(members)
	ins := Inspection{Exists: true, Identities: members, NoExpiry: pttl == -1}
	if pttl > 0 {
		ins.Remaining = time.Duration(pttl) * time.Millisecond
	}
	return ins, nil
}
