package latch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// state is one atomic read of a latch (see state.lua).
type state struct {
	kind     string // "none", "latch", "other"
	gen      string
	count    int64
	initial  int64
	expires  int64 // Unix ms, 0 for none
	aborted  bool
	reason   string
	prevdone string
	now      int64 // server time, Unix ms
}

func (ls *Latches) readState(ctx context.Context, pkey string) (state, error) {
	arr, err := stateScript.Exec(ctx, ls.client, []string{pkey}, nil).ToArray()
	if err != nil {
		return state{}, err
	}
	return decodeState(arr)
}

// decodeState decodes the reply of state.lua. A latch whose count, initial count or expiry does not
// decode (a hash edited behind the package's back) is foreign data: the error wraps ErrForeignData.
func decodeState(arr []rueidis.RedisMessage) (state, error) {
	if len(arr) != 9 {
		return state{}, fmt.Errorf("state: unexpected reply of %d elements", len(arr))
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return state{}, fmt.Errorf("state: status: %w", err)
	}
	var f [9]string
	for i, m := range arr[1:] {
		s, err := m.ToString()
		if err != nil {
			return state{}, fmt.Errorf("state: element %d: %w", i+1, err)
		}
		f[i+1] = s
	}
	st := state{gen: f[1], aborted: f[5] == "1", reason: f[6], prevdone: f[7]}
	if st.now, err = luakit.ParseInt64(f[8]); err != nil {
		return state{}, fmt.Errorf("state: time: %w", err)
	}
	switch status {
	case luakit.StatusAbsent:
		st.kind = "none"
		return st, nil
	case luakit.StatusForeign:
		st.kind = "other"
		return st, nil
	case luakit.StatusOK:
		st.kind = "latch"
	default:
		return state{}, fmt.Errorf("state: unknown status %d", status)
	}
	if st.gen == "" {
		return state{}, fmt.Errorf("%w (empty generation)", ErrForeignData)
	}
	if st.count, err = luakit.ParseInt64(f[2]); err != nil || st.count < 0 {
		return state{}, fmt.Errorf("%w (count is not a decimal int64 ≥ 0)", ErrForeignData)
	}
	if st.initial, err = luakit.ParseInt64(f[3]); err != nil || st.initial < 0 {
		return state{}, fmt.Errorf("%w (initial count is not a decimal int64 ≥ 0)", ErrForeignData)
	}
	if st.expires, err = luakit.ParseInt64(f[4]); err != nil || st.expires < 0 {
		return state{}, fmt.Errorf("%w (expiry is not a decimal int64 ≥ 0)", ErrForeignData)
	}
	return st, nil
}

func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// outcome is what a read state means for one generation's waiter: final says Wait returns now, with
// err (nil when the generation completed).
type outcome struct {
	final bool
	err   error
}

func (l *Latch) outcome(st state) outcome {
	switch {
	case st.kind == "none":
		if l.expiresAtM != 0 && st.now >= l.expiresAtM {
			return outcome{final: true, err: ErrLatchExpired}
		}
		return outcome{final: true, err: ErrReplaced}
	case st.kind == "other":
		return outcome{final: true, err: fmt.Errorf("latch: wait: %w", ErrForeignData)}
	case st.gen != l.gen:
		// Replaced. A generation that had reached zero before the reset still completed.
		if st.prevdone == l.gen {
			return outcome{final: true}
		}
		return outcome{final: true, err: ErrReplaced}
	case st.aborted:
		return outcome{final: true, err: &AbortedError{Reason: st.reason}}
	case st.count == 0:
		return outcome{final: true}
	}
	return outcome{}
}

// Wait blocks until the generation ends and returns nil when it completed: its count was read as
// zero, or a Reset replaced it after it had reached zero. Otherwise it returns:
//   - [ErrReplaced]: a [Latches.Reset] replaced the generation, or it was deleted, before zero;
//   - [ErrLatchExpired]: the latch's expiry ([WithExpiry]) passed first;
//   - an [*AbortedError]: [Latch.Abort] failed the generation (the error carries the reason);
//   - an error wrapping [ErrForeignData]: the key now holds something that is not a latch;
//   - an error wrapping ctx.Err(): ctx ended first (cancelling a Wait never changes the count);
//   - an error matching [ErrNoPermission], not retried: the ACL refuses a read, SSUBSCRIBE or the
//     key's channel (see the package documentation, "Servers");
//   - another error: a terminal server error. Transient and connection errors are retried at the
//     recheck interval until ctx ends.
//
// A generation that has ended returns after one read. Otherwise Wait subscribes to the key's sharded
// Pub/Sub channel and re-reads as "Waking" in the package documentation says: a lost message delays
// the result, never changes it. Safe for concurrent use.
func (l *Latch) Wait(ctx context.Context) error {
	ctx, sc, err := l.ls.cfg.hooks.Begin(ctx, l.ls.op(opWait))
	if err != nil {
		return err
	}
	err = l.wait(ctx)
	l.ls.endAnswer(&sc, err)
	return err
}

// wait is [Latch.Wait], run inside its hook scope.
func (l *Latch) wait(ctx context.Context) (err error) {
	cfg := &l.ls.cfg
	read := func() (outcome, state, bool, error) {
		rctx, cancel := context.WithTimeout(ctx, max(cfg.recheck, time.Second))
		defer cancel()
		st, err := l.ls.readState(rctx, l.pkey)
		if err != nil {
			if ctx.Err() != nil {
				return outcome{}, st, false, fmt.Errorf("latch: wait: %w", ctx.Err())
			}
			if errors.Is(err, ErrForeignData) || luakit.IsTerminal(err) {
				return outcome{}, st, false, fmt.Errorf("latch: wait: %w", err)
			}
			return outcome{}, st, false, nil // retry at the recheck interval
		}
		return l.outcome(st), st, true, nil
	}
	o, _, _, err := read()
	if err != nil {
		return err
	}
	if o.final {
		return o.err
	}

	sub := l.ls.hub.join(l.pkey)
	defer l.ls.hub.leave(sub)
	timer := time.NewTimer(cfg.recheck)
	defer timer.Stop()
	// Wait for the subscription to be confirmed, so that no message published after the next read
	// is missed; a subscription that does not come within the recheck interval is not waited for.
	select {
	case <-sub.ch.ready:
	case <-sub.ch.failed:
		return fmt.Errorf("latch: wait: subscribe: %w", sub.ch.err)
	case <-timer.C:
	case <-ctx.Done():
		return fmt.Errorf("latch: wait: %w", ctx.Err())
	}
	for {
		o, st, ok, err := read()
		if err != nil {
			return err
		}
		if o.final {
			return o.err
		}
		wait := cfg.recheck
		if ok && l.expiresAtM != 0 {
			if d := time.Duration(l.expiresAtM-st.now)*time.Millisecond + time.Millisecond; d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		timer.Reset(wait)
		select {
		case <-sub.wake:
		case <-sub.ch.failed:
			return fmt.Errorf("latch: wait: subscribe: %w", sub.ch.err)
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("latch: wait: %w", ctx.Err())
		}
	}
}

// hub shares one sharded Pub/Sub subscription per channel between the waiters of a Latches.
type hub struct {
	ls    *Latches
	mu    sync.Mutex
	chans map[string]*channel
}

// channel is one subscription: a goroutine running client.Receive while it has waiters.
type channel struct {
	name      string
	waiters   map[*subscriber]struct{}
	ready     chan struct{} // closed at the first subscription confirmation
	confirmed bool
	cancel    context.CancelFunc
	done      chan struct{} // closed when the goroutine has returned
	failed    chan struct{} // closed when the server refused the subscription for good (err is set)
	err       error         // why failed was closed: an error matching ErrNoPermission
}

type subscriber struct {
	ch   *channel
	wake chan struct{} // buffered 1: "re-read"
}

func (h *hub) init(ls *Latches) {
	h.ls = ls
	h.chans = map[string]*channel{}
}

// join registers a waiter on name, starting the channel's goroutine if it has none.
func (h *hub) join(name string) *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[name]
	if c == nil {
		ctx, cancel := context.WithCancel(context.Background())
		c = &channel{name: name, waiters: map[*subscriber]struct{}{}, ready: make(chan struct{}), cancel: cancel, done: make(chan struct{}), failed: make(chan struct{})}
		h.chans[name] = c
		go h.run(ctx, c)
	}
	s := &subscriber{ch: c, wake: make(chan struct{}, 1)}
	c.waiters[s] = struct{}{}
	return s
}

// leave unregisters a waiter; the last one stops the goroutine and waits for it to return.
func (h *hub) leave(s *subscriber) {
	c := s.ch
	h.mu.Lock()
	delete(c.waiters, s)
	last := len(c.waiters) == 0
	if last && h.chans[c.name] == c {
		delete(h.chans, c.name)
	}
	h.mu.Unlock()
	if last {
		c.cancel()
		<-c.done
	}
}

// wakeAll asks every waiter of c to re-read.
func (h *hub) wakeAll(c *channel, confirm bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if confirm && !c.confirmed {
		c.confirmed = true
		close(c.ready)
	}
	for s := range c.waiters {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// run keeps c subscribed until ctx ends, waking the waiters on every message and every
// (re)subscription. When it stops it unsubscribes on the connection that received.
func (h *hub) run(ctx context.Context, c *channel) {
	defer close(c.done)
	client := h.ls.client
	var failing atomic.Bool // a warning was logged since the last confirmed subscription
	rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "ssubscribe" {
			failing.Store(false)
			h.wakeAll(c, true)
		}
	})
	rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, cc rueidis.CommandClient) error {
		if ctx.Err() != nil {
			uctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = cc.Do(uctx, cc.B().Sunsubscribe().Channel(c.name).Build()).Error()
			cancel()
		}
		return err
	})
	backoff := time.NewTimer(0)
	<-backoff.C
	defer backoff.Stop()
	for {
		err := client.Receive(rctx, client.B().Ssubscribe().Channel(c.name).Build(), func(rueidis.PubSubMessage) {
			h.wakeAll(c, false)
		})
		if ctx.Err() != nil {
			return
		}
		if err = luakit.Permission(err); errors.Is(err, ErrNoPermission) {
			// The ACL refuses the channel or SSUBSCRIBE: no retry can succeed. Fail the current
			// waiters and drop the channel, so that a later Wait subscribes afresh (once).
			h.mu.Lock()
			c.err = err
			close(c.failed)
			if h.chans[c.name] == c {
				delete(h.chans, c.name)
			}
			h.mu.Unlock()
			return
		}
		// The subscription ended (a broken connection, a failover): messages may have been lost.
		if !failing.Swap(true) {
			h.ls.cfg.logger.Warn("coordkit/latch: subscription ended, subscribing again", "error", err)
		}
		h.wakeAll(c, false)
		backoff.Reset(min(h.ls.cfg.recheck, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-backoff.C:
		}
	}
}
