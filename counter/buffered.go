package counter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// BufferedOptions configures [NewBuffered]. The zero value uses every default.
type BufferedOptions struct {
	// FlushInterval is how often the background goroutine flushes the pending delta. Default (0): 1s.
	FlushInterval time.Duration
	// FlushTimeout bounds each flush's round trip. Default (0): 5s.
	FlushTimeout time.Duration
	// TTL is passed to [Store.IncrementWithExpire] on every flush: when positive the counter's expiry is
	// set to TTL at each flush; 0 (default) leaves it unchanged.
	TTL time.Duration
	// OnError, when set, is called (from the flushing goroutine) with every failed flush's error.
	// Default: the store's logger logs a warning.
	OnError func(error)
}

// Buffered accumulates increments of one counter in memory and adds them to the server in the
// background, one [Store.IncrementWithExpire] per flush: on every FlushInterval and on Close. Add
// never blocks on I/O, so it suits hot paths (page views, metrics) where a little delay and a bounded
// loss window are acceptable.
//
// Loss window: deltas not yet flushed live only in this process. A crash (or a process exit without
// Close) loses at most the deltas added since the last successful flush, i.e. up to FlushInterval of
// increments plus any still pending after failed flushes. A flush that certainly did not reach the
// server ([ErrDisconnected] without [ErrUncertain], a validation or overflow error) puts its delta back
// into the buffer and is retried at the next flush. A flush whose outcome is uncertain (sent, no
// reply) is not retried, so it is never counted twice: its delta may be lost (at most once).
//
// Reads ([Store.Get]) see only flushed deltas; [Buffered.Pending] reports the local part.
// A Buffered is safe for concurrent use. Its one goroutine ends in Close.
type Buffered struct {
	store *Store
	key   string
	opts  BufferedOptions

	mu      sync.Mutex
	pending int64
	closed  bool

	flushMu sync.Mutex // one flush at a time
	stop    chan struct{}
	done    chan struct{}
}

// NewBuffered returns a Buffered for the counter at key and starts its flushing goroutine. It does
// no I/O. It fails, before starting anything, for an empty key or negative options.
func NewBuffered(store *Store, key string, opts BufferedOptions) (*Buffered, error) {
	if store == nil {
		return nil, errors.New("counter: nil store")
	}
	if _, err := store.key(key); err != nil {
		return nil, err
	}
	if opts.FlushInterval < 0 || opts.FlushTimeout < 0 {
		return nil, fmt.Errorf("counter: negative flush interval or timeout")
	}
	if _, err := ttlMillis(opts.TTL); err != nil {
		return nil, err
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Second
	}
	if opts.FlushTimeout == 0 {
		opts.FlushTimeout = 5 * time.Second
	}
	b := &Buffered{store: store, key: key, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b, nil
}

func (b *Buffered) run() {
	defer close(b.done)
	t := time.NewTicker(b.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), b.opts.FlushTimeout)
			if err := b.Flush(ctx); err != nil {
				b.report(err)
			}
			cancel()
		}
	}
}

func (b *Buffered) report(err error) {
	if b.opts.OnError != nil {
		b.opts.OnError(err)
		return
	}
	b.store.cfg.logger.Warn("counter: buffered flush failed", "error", err)
}

// Add adds delta (any sign) to the local buffer. It does no I/O and never blocks on the server. It
// returns [ErrOverflow] when the pending sum would leave the int64 range (the buffer is unchanged)
// and [ErrClosed] after Close.
func (b *Buffered) Add(delta int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if (delta > 0 && b.pending > math.MaxInt64-delta) || (delta < 0 && b.pending < math.MinInt64-delta) {
		return fmt.Errorf("%w: pending buffered delta", ErrOverflow)
	}
	b.pending += delta
	return nil
}

// Pending returns the delta added locally and not yet flushed.
func (b *Buffered) Pending() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending
}

// Flush sends the pending delta now (nothing when it is 0) and waits for the reply, bounded by ctx.
// On success the delta is on the server. On an error that certainly wrote nothing the delta is put
// back into the buffer; on [ErrUncertain] it is dropped (see the loss window in [Buffered]).
// Concurrent flushes run one at a time.
func (b *Buffered) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	d := b.pending
	b.pending = 0
	b.mu.Unlock()
	if d == 0 {
		return nil
	}
	_, err := b.store.IncrementWithExpire(ctx, b.key, d, b.opts.TTL)
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUncertain) {
		return fmt.Errorf("counter: buffered delta %d may be lost: %w", d, err)
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

// Close stops the background goroutine (waiting for it) and makes a final Flush bounded by ctx,
// returning its error; later Adds fail with [ErrClosed]. A delta the final flush could not write stays
// in Pending and is lost when the Buffered is dropped. Close is idempotent: a second call only
// flushes again.
func (b *Buffered) Close(ctx context.Context) error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		close(b.stop)
	}
	<-b.done
	return b.Flush(ctx)
}
