package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// FairLocker takes fenced leases in arrival order: waiters are served first come, first served, and a
// release hands the lease directly to the first live waiter, with its fencing token, so the waiter
// needs no round trip of its own after the release. Create it with [NewFair]; it is safe for
// concurrent use by many goroutines and holds no background goroutines of its own. The zero value is
// not usable. A FairLocker never closes or reconfigures the caller's client.
//
// Its leases are [*Lease] values with the whole contract of the lock's leases (Extend, KeepAlive,
// Verify, Release, Close, Done, Context, the fencing token); Release and Close hand the lease to the
// next waiter instead of deleting it when someone waits.
//
// # Keys
//
// A fair lock named name uses the plain lock's two keys ([Keys]) and two more, all in the name's Cluster
// slot: "{name}:queue", a list of waiter entries, oldest first, and per queued waiter two keys:
// "{name}:waiter:<owner token>", a string that exists while it waits (expiring one wait slice after
// its last renewal), and "{name}:waiter:<owner token>:grant", a list that a grant creates with the
// fencing token (expiring one slice later when unread) and that the waiter pops. The release script
// reaches the next waiter's keys by name: they are derived in the script from "{name}:waiter:", which
// is passed as a key for the Cluster slot check and ACL key patterns; an ACL user needs the key
// pattern "{name}:*" (or a prefix pattern that covers it). The commands are those of the lock plus
// EXISTS, RPUSH, LPOP, LPUSH, LREM, LINDEX, BLPOP and PEXPIRE.
//
// # Order and liveness
//
// While anyone is queued, no attempt barges: TryAcquire answers [ErrNotAcquired] even when the lease
// itself is free (a holder's lease expired instead of being released), and that attempt grants the
// lease to the queue's first live waiter. A waiter queues with its lease TTL and blocks on its grant
// list (BLPOP, on a connection of rueidis' blocking pool) for half a wait slice at a time
// ([WithWaitSlice], default 1s), renewing its entry between blocks. A release pops entries until one's
// waiter key still exists, issues the next fencing token from the fence counter (with the plain lock's
// counter guard), pushes it onto that waiter's grant list and sets the lease to the waiter's owner
// token and TTL, and the waiter's blocked pop returns it. A waiter whose wait ends (ctx) removes its
// entry and, when a grant reached it after it stopped waiting, hands that lease on in the same script,
// so no lease is stranded and no later waiter is lost.
//
// A waiter that dies (its process stops) is skipped by the first release after its entry's slice
// ended. One that dies within its last slice before its turn is granted the lease; its grant list
// lives a slice, and the next waiter takes the lease back at a renewal once the grant went unread
// (still in the list) for a quarter of the dead waiter's slice, by the server's clock: such a waiter
// delays the queue by at most its slice, provided that a waiter behind it renews within that slice
// (the same [WithWaitSlice] or a shorter one; an unread grant expires a slice after it was made, and
// the lease then stays with the dead waiter until its TTL). A live waiter reads its grant within a round trip or two;
// one that reads it after it was taken back finds no grant and queues again.
//
// # Local estimate of a grant
//
// A granted lease's local estimate runs from the send of the waiter's last command that the server ran
// before the grant (its queueing attempt, or its last slice renewal, which checks that no grant came
// yet), never from the server's grant time, so it never outlives the server's lease on a correct
// clock. It is shorter than the TTL by at most the time the waiter was blocked before the grant (at
// most half a slice); use [Lease.KeepAlive] or [Lease.Extend] to restore the full TTL.
//
// # Alongside the plain lock
//
// A [Locker] and a FairLocker on the same name share the lease and fence keys, so during a rolling
// deploy from one to the other mutual exclusion and fencing tokens hold across both. Order does not:
// a Locker's attempt barges past the queue, and its release deletes the lease without a grant; the
// queued waiters then take it at their next slice renewal (at most half a slice later) in queue
// order. A Locker's waiter is woken by the grant's write to the lease key like by any other.
//
// Hooks see the operations of a [Locker] (LOCK TRY ACQUIRE, LOCK ACQUIRE, and the lease's).
type FairLocker struct {
	l        *Locker
	slice    time.Duration
	sliceArg string // slice in whole ms, the scripts' ARGV
}

// NewFair returns a FairLocker over client, configured by the [Locker]'s options (key prefix, hooks,
// renew fraction, retry delay, cleanup timeout, logger) and [WithWaitSlice]; [WithTracker] and
// [WithStrictSlots] have no effect on it. It does no I/O. It fails with an error wrapping
// [ErrNilClient] for a nil client and with an error matching [ErrInvalidConfig] for an invalid option.
func NewFair(client rueidis.Client, opts ...Option) (*FairLocker, error) {
	l, cfg, err := newLocker(client, opts)
	if err != nil {
		return nil, err
	}
	slice := cfg.waitSlice
	if slice <= 0 {
		slice = DefaultWaitSlice
	}
	return &FairLocker{l: l, slice: slice, sliceArg: strconv.FormatInt(slice.Milliseconds(), 10)}, nil
}

// fairState is a fair lease's part of its backend: the four keys of the fair scripts, the arguments
// and, while waiting, the waiter's grant list and the last instant its estimate can start from.
type fairState struct {
	keys   [4]string // lease, fence, queue, waiter key prefix (physical)
	args   [4]string // owner token, TTL in ms, mode, slice in ms
	grant  string    // the waiter's grant list (prefix + owner token + ":grant")
	vouch  time.Time // send time of the last command that saw this waiter queued and not granted
	queued bool      // the latest attempt queued this waiter
}

// newLease validates a fair acquisition of name before any I/O and makes the Lease it grants.
func (f *FairLocker) newLease(name string, ttl time.Duration) (*Lease, error) {
	r, err := f.l.named(name, ttl)
	if err != nil {
		return nil, err
	}
	h := f.l.newLease(&r)
	prefix := f.l.keys.Prefix()
	fs := &fairState{}
	// the queue key and the waiter key prefix, sliced from one buffer
	var sb strings.Builder
	sb.Grow(2*(len(prefix)+len(name)) + len("{}:queue{}:waiter:"))
	for _, part := range [...]string{prefix, "{", name, "}:queue", prefix, "{", name, "}:waiter:"} {
		sb.WriteString(part)
	}
	buf := sb.String()
	q := len(prefix) + len(name) + len("{}:queue")
	fs.keys = [4]string{r.keys[0], r.keys[1], buf[:q], buf[q:]}
	fs.args = [4]string{r.args[0], r.args[1], "try", f.sliceArg}
	h.b.fair = fs
	return h, nil
}

// block is how long a waiter blocks on its grant list before renewing its entry: half a slice, at most
// a quarter of the lease TTL, at least 1ms.
func (f *FairLocker) block(ttl time.Duration) time.Duration {
	return max(min(f.slice/2, ttl/4), time.Millisecond)
}

// TryAcquire makes one attempt to take the fair lock named name and returns at once: it succeeds only
// when the lease is free and nobody waits (no barging past the queue). Keys, validation and results
// are those of [Locker.TryAcquire]; [ErrNotAcquired] also when the lease is free but waiters are
// queued (the attempt then grants the lease to the first live one).
func (f *FairLocker) TryAcquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := f.l.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	var h *Lease
	h, err = f.newLease(name, ttl)
	if err == nil {
		if a := f.l.own.Try(ctx, "acquire", &h.b); a.Err != nil {
			h, err = nil, a.Err
		}
	}
	endAcquire(&sc, err)
	return h, err
}

// Acquire takes the fair lock named name, queueing behind earlier waiters while it is held: it returns
// once a release (or an expired holder's lease found by any attempt) granted it the lease, in arrival
// order. It blocks on its own grant list, sending nothing but one renewal of its entry per half wait
// slice (see the FairLocker's documentation, # Order and liveness). Keys and validation are those of
// [Locker.Acquire].
//
// Transient errors and late grants are retried after the retry delay (a late grant is handed on to the
// next waiter and this caller queues again, at the end). When ctx ends it returns within a round trip
// or two, also while blocked (it pushes a cancel marker onto its own grant list, which ends the pop;
// where the ACL refuses that push, the pop ends at its block timeout, half a slice at most): it
// removes its entry (handing on a grant that arrived meanwhile) and returns an error wrapping
// ctx.Err() (and [ErrUncertain] when an attempt was in flight; its cleanup is sent). Other errors end
// the wait the same way.
func (f *FairLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := f.l.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	var h *Lease
	h, err = f.newLease(name, ttl)
	if err == nil {
		if err = f.wait(ctx, h, ttl); err != nil {
			h = nil
		}
	}
	sc.End(err)
	return h, err
}

// wait is Acquire's loop: queue, block on the grant list, renew the entry, until granted.
func (f *FairLocker) wait(ctx context.Context, h *Lease, ttl time.Duration) error {
	b := &h.b
	fs := b.fair
	fs.args[2] = "wait"
	for {
		a := f.l.attempt(ctx, h)
		fs.args[2] = "wait"
		switch {
		case a.Err == nil:
			return nil
		case a.Busy && fs.queued:
			requeue, err := f.await(ctx, h, ttl)
			if err != nil || !requeue {
				return err
			}
			// requeue: a late grant was handed on (new owner token), or the entry lapsed (same owner)
		case a.Retry:
			if err := luakit.Sleep(ctx, nil, f.l.own.RetryDelay); err != nil {
				return fmt.Errorf("lock: acquire: %w", err)
			}
		default:
			return a.Err
		}
	}
}

// await blocks on the waiter's grant list until its grant: nil once the handle was granted; requeue
// true when the waiter must queue again (its entry lapsed: mode 'requeue', same owner; or a late grant was
// handed on: a fresh attempt with a new owner token).
func (f *FairLocker) await(ctx context.Context, h *Lease, ttl time.Duration) (requeue bool, err error) {
	b := &h.b
	fs := b.fair
	c := b.client
	block := f.block(ttl)
	for {
		popped, rerr := f.pop(ctx, c, fs, block)
		if ctx.Err() != nil {
			return false, f.leave(ctx, h)
		}
		if rerr == nil {
			if token, ok := grantToken(popped); ok {
				return f.granted(ctx, h, token, ttl)
			}
		}
		// Timed out (nil), or the read failed: renew the entry; its reply says where we stand.
		start := time.Now()
		arr, err := fairRefreshScript.Exec(ctx, c, fs.keys[:], []string{fs.args[0], fs.args[3]}).ToArray()
		if err != nil {
			if ctx.Err() != nil {
				return false, f.leave(ctx, h)
			}
			if !luakit.IsTransient(err) && !luakit.IsUncertain(err) {
				f.leave(ctx, h)
				return false, fmt.Errorf("lock: acquire: %w", luakit.MarkForeign(err))
			}
			if err := luakit.Sleep(ctx, nil, f.l.own.RetryDelay); err != nil {
				return false, f.leave(ctx, h)
			}
			continue
		}
		status, err := refreshStatus(arr)
		if err == nil && status == luakit.StatusCounter {
			f.leave(ctx, h)
			reason, _ := arr[1].ToString()
			return false, &CounterError{Reason: CounterReason(reason)}
		}
		if err != nil {
			f.leave(ctx, h)
			return false, fmt.Errorf("lock: acquire: %w: malformed reply: %w", ErrUncertain, err)
		}
		switch status {
		case luakit.StatusOK:
			token, err := luakit.Int64(arr[1])
			if err != nil || token <= 0 {
				f.leave(ctx, h)
				return false, fmt.Errorf("lock: acquire: fencing token: %w", errors.Join(ErrCounter, err))
			}
			return f.granted(ctx, h, token, ttl)
		case luakit.StatusBusy:
			fs.vouch = start
		default: // absent: the entry lapsed; queue again with the same owner token
			fs.args[2] = "requeue"
			b.r.fresh = true
			return true, nil
		}
	}
}

// pop blocks on the waiter's grant list for block and returns BLPOP's reply.
// A deadline lets rueidis read the blocking reply on this goroutine, which is the fastest wake-up, but
// rueidis then ignores ctx's cancellation until the server answers; so when ctx ends during the pop,
// a cancel marker ("c", which is no grant) is pushed onto the grant list from the client's pipelined
// connection (RPUSH, after any grant; PEXPIRE, so that a marker that arrives after the pop ended
// expires a slice later), and the pop returns at once. pop returns only after that push finished
// (bounded by the cleanup timeout), so no goroutine outlives it.
func (f *FairLocker) pop(ctx context.Context, c rueidis.Client, fs *fairState, block time.Duration) ([]rueidis.RedisMessage, error) {
	cleanup := f.l.own.CleanupTimeout
	if cleanup <= 0 {
		cleanup = time.Second // WithCleanupTimeout's default
	}
	rctx, cancel := context.WithTimeout(ctx, block+cleanup+time.Second)
	defer cancel()
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(woken)
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanup)
		defer wcancel()
		c.DoMulti(wctx, c.B().Rpush().Key(fs.grant).Element(fairCancelMarker).Build(),
			c.B().Pexpire().Key(fs.grant).Milliseconds(f.slice.Milliseconds()).Build())
	})
	popped, err := c.Do(rctx, c.B().Blpop().Key(fs.grant).Timeout(block.Seconds()).Build()).ToArray()
	if !stop() {
		<-woken
	}
	return popped, err
}

// fairCancelMarker is what a waiter whose ctx ended pushes onto its own grant list to end its pop.
const fairCancelMarker = "c"

// granted starts the handle for a grant with token; a late grant was handed on by the cleanup and the
// caller queues again with a new owner token.
func (f *FairLocker) granted(ctx context.Context, h *Lease, token int64, ttl time.Duration) (bool, error) {
	h.b.token = token
	err := h.own.GrantRelayed(ctx, &h.b, &f.l.own, h.b.fair.vouch, ttl)
	if errors.Is(err, luakit.ErrLateReply) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock: acquire: %w", err)
	}
	return false, nil
}

// leave removes the waiter from the queue (handing on a grant that reached it) and returns the error
// that ends the wait: ctx's when it ended.
func (f *FairLocker) leave(ctx context.Context, h *Lease) error {
	ownership.Cleanup(ctx, &f.l.own, h.b.cancelWait)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock: acquire: %w", err)
	}
	return nil
}

// grantToken reads BLPOP's reply {key, "<token>:<slice ms>"} from a waiter's grant list.
func grantToken(popped []rueidis.RedisMessage) (int64, bool) {
	if len(popped) != 2 {
		return 0, false
	}
	v, err := popped[1].ToString()
	if err != nil {
		return 0, false
	}
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[:i]
	}
	token, err := strconv.ParseInt(v, 10, 64)
	if err != nil || token <= 0 {
		return 0, false
	}
	return token, true
}

// refreshStatus reads fair_refresh.lua's status row: {0}, {1, token}, {-4, reason} or {-1}.
func refreshStatus(arr []rueidis.RedisMessage) (int64, error) {
	if len(arr) == 0 {
		return 0, errors.New("empty reply")
	}
	s, err := arr[0].AsInt64()
	if err != nil {
		return 0, err
	}
	switch {
	case s == luakit.StatusOK && len(arr) == 2, s == luakit.StatusCounter && len(arr) == 2,
		s == luakit.StatusBusy && len(arr) == 1, s == luakit.StatusAbsent && len(arr) == 1:
		return s, nil
	}
	return 0, fmt.Errorf("unexpected reply: status %d with %d elements", s, len(arr))
}

// sendFair sends fair_acquire.lua for the attempt.
func (b *backend) sendFair(ctx context.Context) ownership.Sent {
	fs := b.fair
	fs.args[0] = b.r.args[0]
	fs.queued = false
	sent := b.cfg.Send(ctx, fairAcquireScript, b.client, fs.keys[:], fs.args[:])
	fs.vouch = sent.Start
	return sent
}

// decodeFair reads fair_acquire.lua's reply: the token alone when granted; {0, pttl} busy (mode
// 'try'); {0, 'queued'} queued; {-4, reason} for a counter that cannot issue tokens.
func (b *backend) decodeFair(msg rueidis.RedisMessage) (ownership.Reply, error) {
	if !msg.IsArray() {
		return b.decodeToken(msg)
	}
	arr, err := msg.ToArray()
	if err != nil {
		return ownership.Reply{}, err
	}
	if len(arr) == 2 && arr[1].IsString() {
		if status, err := arr[0].AsInt64(); err == nil && status == luakit.StatusBusy {
			if v, _ := arr[1].ToString(); v == "queued" {
				b.fair.queued = true
				b.fair.grant = b.fair.keys[3] + b.fair.args[0] + ":grant"
				return ownership.Reply{Busy: true, HolderTTL: -1}, nil
			}
		}
	}
	r, err := b.decodeRow(msg)
	if r.Busy && r.HolderTTL < -1 {
		r.HolderTTL = -1 // free with waiters queued
	}
	return r, err
}

// cancelWait is a waiter's owner-checked cleanup: fair_cancel.lua removes its entry and keys and hands
// on a lease granted to it.
func (b *backend) cancelWait(ctx context.Context) (bool, error) {
	fs := b.fair
	n, err := fairCancelScript.ExecOrdered(ctx, b.client, fs.keys[:], []string{b.r.args[0], fs.args[1], fs.args[3]}).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeOwned("cancel", n)
}

// releaseFair is a fair lease's Release: fair_release.lua hands the lease to the next live waiter or
// deletes it, ordered behind the lease's earlier commands like every command of a handle.
func (b *backend) releaseFair(ctx context.Context) (bool, error) {
	n, err := fairReleaseScript.ExecOrdered(ctx, b.client, b.fair.keys[:], b.r.args[:1]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeRelease(n)
}
