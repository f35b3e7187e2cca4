package semaphore

import (
	"context"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// Cleanup stages: the operation whose owner-token release is being retried (a metric attribute).
const (
	stageAcquire = "acquire"
	stageExtend  = "extend"
	stageClose   = "close"
)

const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// releaseOnce sends one owner-token release bounded by the cleanup timeout, derived from parent without
// its cancellation. A nil error means the server answered: this owner holds no permit any more.
func (s *Semaphore) releaseOnce(parent context.Context, owner string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.cfg.releaseTimeout)
	defer cancel()
	return releaseScript.Exec(cctx, s.client, []string{s.key}, []string{owner}).Error()
}

// cleanup sends a bounded owner-token release that survives the caller's cancellation and reports whether
// the server answered it. When it did not, the release is retried in the background (see retryLater).
func (s *Semaphore) cleanup(ctx context.Context, owner, stage string) bool {
	err := s.releaseOnce(ctx, owner)
	if err == nil {
		return true
	}
	s.retryLater(owner, stage, err)
	return false
}

// retryLater retries the owner-token release in a goroutine with jittered exponential backoff until it is
// answered or the retry window elapses (then the cleanup is abandoned: counted and logged). A terminal
// error (NOPERM, WRONGTYPE, ...) is abandoned at once: retrying cannot fix it.
func (s *Semaphore) retryLater(owner, stage string, err error) {
	if luakit.IsTerminal(err) {
		s.abandon(stage, luakit.ClassTerminal.String())
		return
	}
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		s.abandon(stage, "shutdown")
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.retryLoop(owner, stage)
	}()
}

func (s *Semaphore) retryLoop(owner, stage string) {
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
			s.abandon(stage, "shutdown")
			return
		case <-timer.C:
		}
		err := s.releaseOnce(s.bgCtx, owner)
		if err == nil {
			return
		}
		if s.bgCtx.Err() != nil {
			s.abandon(stage, "shutdown")
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
	s.abandoned.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("stage", stage), attribute.String("reason", reason)))
	s.cfg.logger.Warn("semaphore: cleanup release abandoned; the permit remains until it expires "+
		"(a permit without expiry until its member or the key is deleted)",
		"stage", stage, "reason", reason)
}

// Shutdown stops the Semaphore's background work: it waits for background cleanup retries to finish
// and, when ctx ends first, stops the remaining ones (each counted as abandoned with reason "shutdown")
// and returns ctx.Err() once they have exited. After Shutdown, [Semaphore.TryAcquire] fails with
// [ErrShutdown] and an unconfirmed cleanup is abandoned instead of retried; permits already held can
// still be extended, verified and released. Shutdown never closes the client. It is idempotent; call
// it before closing the client (and in tests, before goleak checks).
func (s *Semaphore) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shut = true
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
		return ctx.Err()
	}
}
