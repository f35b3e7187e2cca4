package counter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Buffered accumulates increments of one counter in memory and adds them to the server in the
// background, one [Store.IncrementWithExpire] per flush: every flush interval ([WithFlushInterval])
// and on Close. Add never blocks on I/O, so it suits hot paths (page views, metrics) where a little
// delay and a bounded loss window are acceptable. Reads ([Store.Get]) see only flushed deltas;
// [Buffered.Pending] reports the local part.
//
// Loss window: a crash (or an exit without Close) loses the deltas added since the last successful
// flush: up to one flush interval of increments plus any still pending after failed flushes. A flush
// that certainly did not reach the server ([ErrDisconnected] without [ErrUncertain], a validation,
// overflow or not-an-integer error raised by INCRBY itself, or [ErrNoPermission] from the script's
// ACL check before any write) puts its delta back and is retried at the next flush. After any other
// error, uncertain ones (sent, no reply) included, the script may have applied the delta: it is not
// retried, so it may be lost (at most once) but is never counted twice.
//
// A Buffered is safe for concurrent use. Its one goroutine ends in Close.
type Buffered struct {
	store *Store
	key   string
	cfg   bufferedConfig

	mu      sync.Mutex
	pending int64
	closed  bool

	flushMu    sync.Mutex         // one flush at a time
	stop       chan struct{}      // closed by the first Close: the goroutine stops ticking
	done       chan struct{}      // closed when the goroutine returns
	flushCtx   context.Context    // parent of every background flush's context
	stopFlush  context.CancelFunc // cancels flushCtx: ends a background flush in flight
	stopClosed sync.Once
}

// NewBuffered returns a Buffered for the counter at key and starts its flushing goroutine. It does
// no I/O. It fails, before starting anything, with an error matching [ErrInvalidConfig] for a nil
// store, an empty key or an invalid option; nil options are ignored.
func NewBuffered(store *Store, key string, opts ...BufferedOption) (*Buffered, error) {
	if store == nil {
		return nil, luakit.InvalidConfig("counter", "nil store")
	}
	if _, err := store.key(key); err != nil {
		return nil, err
	}
	cfg := defaultBufferedConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	b := &Buffered{store: store, key: key, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	b.flushCtx, b.stopFlush = context.WithCancel(context.Background())
	go b.run()
	return b, nil
}

func (b *Buffered) run() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.flushInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			// Without a deadline on the context itself, rueidis queues the command on the pipeline
			// (with one, it may write it synchronously and ignore a cancellation until the deadline),
			// so Close's cancellation of flushCtx ends the flush at once.
			ctx, cancel := context.WithTimeout(b.flushCtx, b.cfg.flushTimeout)
			qctx, stop := luakit.WithoutDeadline(ctx)
			if err := b.flush(qctx); err != nil {
				b.report(err)
			}
			stop()
			cancel()
		}
	}
}

func (b *Buffered) report(err error) {
	if b.cfg.onError != nil {
		b.cfg.onError(err)
		return
	}
	b.store.cfg.logger.Warn("coordkit/counter: buffered flush failed", "error", err)
}

// Add adds delta (any sign) to the local buffer. It does no I/O and never blocks on the server. It
// returns [ErrOverflow] when the pending sum would leave the int64 range (the buffer is unchanged)
// and [ErrClosed] after Close.
func (b *Buffered) Add(delta int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	if (delta > 0 && b.pending > math.MaxInt64-delta) || (delta < 0 && b.pending < math.MinInt64-delta) {
		return fmt.Errorf("%w: pending buffered delta", ErrOverflow)
	}
	b.pending += delta
	return nil
}

// Pending returns the delta added locally and not yet flushed. It does no I/O.
func (b *Buffered) Pending() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending
}

// Flush sends the pending delta now (nothing when it is 0) and waits for the reply, bounded by ctx.
// On success the delta is on the server. On an error that certainly wrote nothing the delta is put
// back into the buffer (see the loss window in [Buffered]); on any other server error it is dropped; on [ErrUncertain] it is dropped (see the loss window in [Buffered]).
// Concurrent flushes, and the background ones, run one at a time. It fails with [ErrClosed] after
// Close (which makes the last flush itself).
func (b *Buffered) Flush(ctx context.Context) error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return errClosed
	}
	return b.flush(ctx)
}

func (b *Buffered) flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	d := b.pending
	b.pending = 0
	b.mu.Unlock()
	if d == 0 {
		return nil
	}
	_, err := b.store.IncrementWithExpire(ctx, b.key, d, b.cfg.ttl)
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUncertain) {
		return fmt.Errorf("counter: buffered delta %d may be lost: %w", d, err)
	}
	if !notApplied(err) {
		// A server error the script may have raised after its INCRBY ran: the delta may be counted,
		// so adding it again could count it twice.
		return fmt.Errorf("counter: buffered delta %d dropped (the failed flush may have applied it): %w", d, err)
	}
	b.mu.Lock()
	if (d > 0 && b.pending > math.MaxInt64-d) || (d < 0 && b.pending < math.MinInt64-d) {
		b.mu.Unlock()
		return fmt.Errorf("counter: buffered delta %d lost (re-buffering would overflow): %w", d, err)
	}
	b.pending += d
	b.mu.Unlock()
	return fmt.Errorf("counter: buffered flush failed, delta re-buffered: %w", err)
}

// Close makes later Add and Flush calls fail with [ErrClosed], stops the background goroutine and
// makes a final flush bounded by ctx, returning its error. A background flush in flight is waited
// for until ctx ends; then Close cancels it (its delta may be lost, as for any uncertain flush, and
// the flush error handler may still be called with that error) and returns an error wrapping
// ctx.Err() without the final flush. A delta that Close could not write stays in Pending and is lost
// when the Buffered is dropped. Close is idempotent: a later Close waits for the goroutine in the
// same way, flushes what an earlier one could not write (nothing is sent when nothing is pending),
// and returns nil once nothing is.
func (b *Buffered) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.stopClosed.Do(func() { close(b.stop) })
	select {
	case <-b.done:
		b.stopFlush()
	case <-ctx.Done():
		// Ends the flush in flight; the goroutine returns as soon as the client gives the command up
		// (at once on an open connection, after the dial timeout on one rueidis is still dialling).
		b.stopFlush()
		return fmt.Errorf("counter: close: waiting for the background flush: %w", ctx.Err())
	}
	return b.flush(ctx)
}

// notApplied reports whether a flush's error proves that its delta was not counted: the call was
// refused before reaching the server, failed validation, was refused by the script's ACL check (which
// runs before the first write), or INCRBY, the script's first write, failed.
func notApplied(err error) bool {
	switch {
	case errors.Is(err, ErrUncertain):
		return false
	case errors.Is(err, ErrDisconnected), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrClosed),
		errors.Is(err, ErrOverflow), errors.Is(err, ErrNotInteger):
		return true
	}
	var pe *luakit.PermissionError
	return errors.As(err, &pe) && strings.HasSuffix(pe.Reason, "command this script needs")
}
