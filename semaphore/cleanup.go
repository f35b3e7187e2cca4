package semaphore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// Cleanup stages: the operation whose owner-token release is being retried (a metric attribute).
const (
	stageAcquire = "acquire"
	stageClose   = "close"
)

// reasonClosed is the "reason" attribute of a cleanup abandoned because the Semaphore was closed.
const reasonClosed = "closed"

const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// retryLater retries an unanswered owner-token release (err was its error) in a goroutine with jittered
// exponential backoff until it is answered or the retry window elapses (then the cleanup is abandoned:
// counted and logged). A terminal error (NOPERM, WRONGTYPE, ...) is abandoned at once: retrying cannot
// fix it. release sends one attempt; it is given a ctx bounded by the cleanup timeout (a handle's
// Release when the permit was granted, so that an answered retry settles it).
func (s *Semaphore) retryLater(stage string, err error, release func(context.Context) error) {
	if luakit.IsTerminal(err) {
		s.abandon(stage, luakit.ClassTerminal.String())
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.abandon(stage, reasonClosed)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.retryLoop(stage, release)
	}()
}

func (s *Semaphore) retryLoop(stage string, release func(context.Context) error) {
	deadline := time.Now().Add(s.cfg.retryWindow)
	backoff := min(firstBackoff, s.cfg.retryWindow/4)
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		// Full jitter in [backoff/2, backoff), never past the window's end.
		wait := backoff/2 + rand.N(backoff/2+1)
		if left := time.Until(deadline); wait > left {
			wait = max(left, 0)
		}
		timer.Reset(wait)
		select {
		case <-s.bgCtx.Done():
			s.abandon(stage, reasonClosed)
			return
		case <-timer.C:
		}
		// An attempt in flight when Close stops the retries still ends by the cleanup timeout.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(s.bgCtx), s.cfg.own.CleanupTimeout)
		err := release(cctx)
		cancel()
		if err == nil {
			return
		}
		if s.bgCtx.Err() != nil {
			s.abandon(stage, reasonClosed)
			return
		}
		if luakit.IsTerminal(err) || !time.Now().Before(deadline) {
			s.abandon(stage, luakit.Classify(err).String())
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// abandon counts and logs a cleanup that was given up. Never a key or token in either.
func (s *Semaphore) abandon(stage, reason string) {
	kv := []attribute.KeyValue{attribute.String("stage", stage), attribute.String("reason", reason)}
	if s.cfg.own.Instance != "" {
		kv = append(kv, attribute.String(AttrInstance, s.cfg.own.Instance))
	}
	s.abandoned.Add(context.Background(), 1, metric.WithAttributes(kv...))
	s.cfg.own.Logger.Warn("semaphore: cleanup release abandoned; the permit remains until it expires "+
		"(a permit without expiry until its member or the key is deleted)",
		"stage", stage, "reason", reason)
}

// Close stops the Semaphore's background work. It makes later [Semaphore.TryAcquire] calls fail with
// [ErrClosed] before any I/O (and a waiting [Semaphore.Acquire] at its next attempt), and an
// unconfirmed cleanup is abandoned from then on instead of retried. It waits for the background
// cleanup retries already running to finish; when ctx ends first it stops them (each counted as
// abandoned with reason "closed"), waits for their goroutines to exit and returns an error wrapping
// ctx.Err(). Permits already held can still be extended, verified and released. Close is idempotent
// (a second call waits for what is left, usually nothing) and never closes the client; call it before
// closing the client (and in tests, before goleak checks).
func (s *Semaphore) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.bgCancel()
		return nil
	case <-ctx.Done():
		s.bgCancel()
		<-done
		return fmt.Errorf("semaphore: close: %w", ctx.Err())
	}
}
