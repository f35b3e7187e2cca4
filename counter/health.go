package counter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// refuse returns the error of a call made while the store is disconnected or closed, or nil. The
// first call of a store first reaches the server with one PTTL of key, a physical key of the call
// (see verify).
func (s *Store) refuse(ctx context.Context, key string) error {
	if s.closed.Load() {
		return errClosed
	}
	if !s.healthy.Load() {
		return fmt.Errorf("%w: waiting for a probe to reach the server", ErrDisconnected)
	}
	if !s.verified.Load() {
		return s.verify(ctx, key)
	}
	return nil
}

// verify sends one PTTL of key (a command every counter operation's ACL already grants) (a read routed like the call's command, so on Cluster it reaches
// that key's node), bounded by ctx and the probe timeout, unless a reply has already been read through
// the store: a store created while the server is down (or after its connection broke) then learns it
// before sending its first command, so that command is refused, not uncertain. A PTTL that does not
// get a reply within the probe timeout, or meets a broken connection, marks the store disconnected
// (the probe takes over) and returns ErrDisconnected; one that ends with ctx returns ctx's error; a
// server error reply (NOAUTH, for example) still proves the server reachable.
func (s *Store) verify(ctx context.Context, key string) error {
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if s.verified.Load() {
		return nil
	}
	if !s.healthy.Load() {
		return fmt.Errorf("%w: waiting for a probe to reach the server", ErrDisconnected)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.probeTimeout)
	defer cancel()
	err := s.client.Do(pctx, pttl(s.client, key)).Error()
	var re *rueidis.RedisError
	if err == nil || errors.As(err, &re) {
		s.verified.Store(true)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("counter: %w", ctx.Err())
	}
	s.markDown(key)
	return fmt.Errorf("%w: %w", ErrDisconnected, err)
}

// pttl builds the PTTL that verify and the probe send to a server that may be restarting. It is
// pinned (never returned to rueidis's command pool): when a read-only command's first attempt meets a
// connection that is breaking, rueidis retries it on a new connection and, once that attempt is
// answered, recycles the command, while the broken connection's writer goroutine may still be reading
// it, with no ordering between the two (a data race the race detector reports, and a recycled command
// could be written to the dying socket). A probe is the command most likely to meet exactly that, so
// it costs one small allocation instead.
func pttl(c rueidis.Client, key string) rueidis.Completed {
	return c.B().Pttl().Key(key).Build().Pin()
}

// connectionLost reports whether err says the connection to the server is broken (as opposed to a
// server error reply, a nil reply, or the caller's own context ending).
func connectionLost(ctx context.Context, err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return false
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return false // the caller gave up; says nothing about the connection
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, rueidis.ErrClosing)
}

// fail converts the transport, context or server error of a call into the package's vocabulary,
// always with the "counter: " prefix, and, when the connection is lost, marks the store disconnected
// and starts the probe. key is a physical key of the call, used by the probe so that on Cluster it
// reaches the same node. write says whether the call could change server state (then anything but a
// dial error or a server error reply is uncertain).
func (s *Store) fail(ctx context.Context, key string, write bool, err error) error {
	err = luakit.Permission(err) // a NOPERM reply of a plain command (GET, MGET) matches ErrNoPermission
	if connectionLost(ctx, err) {
		s.markDown(key)
		if !write || luakit.NotSent(err) {
			return fmt.Errorf("%w: %w", ErrDisconnected, err)
		}
		return &kindError{
			msg:  "counter: server unreachable, outcome uncertain: " + err.Error(),
			errs: []error{ErrDisconnected, ErrUncertain, err},
		}
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) && !re.IsNil() {
		return serverError(re, err)
	}
	if write && !rueidis.IsRedisNil(err) {
		return fmt.Errorf("%w: %w", errUncertain, err)
	}
	return fmt.Errorf("counter: %w", err)
}

// markDown switches the store to disconnected and starts the probe goroutine if none runs.
func (s *Store) markDown(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	s.probeKey = key
	if s.healthy.Swap(false) {
		s.cfg.logger.Warn("coordkit/counter: server unreachable; calls fail fast until a probe succeeds")
	}
	if s.probing {
		return
	}
	s.probing = true
	done := make(chan struct{})
	s.probeDone = done
	go s.probe(done)
}

// probe runs while the store is disconnected: every probe interval it sends one PTTL for the key of
// the call that failed (so on Cluster it reaches that key's node) and marks the store healthy on the
// first reply, an error reply included. It ends on success or on Close (which cancels s.probeCtx, ending a probe in flight),
// and closes done when it returns.
func (s *Store) probe(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.probeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.probeCtx.Done():
			s.endProbe(false)
			return
		case <-t.C:
		}
		s.mu.Lock()
		key := s.probeKey
		s.mu.Unlock()
		// WithoutDeadline: a command whose context carries a deadline may be written synchronously
		// and then ignore Close's cancellation until the deadline (see Buffered.run).
		ctx, cancel := context.WithTimeout(s.probeCtx, s.cfg.probeTimeout)
		qctx, stop := luakit.WithoutDeadline(ctx)
		err := s.client.Do(qctx, pttl(s.client, key)).Error()
		stop()
		cancel()
		var re *rueidis.RedisError
		if err != nil && !errors.As(err, &re) {
			continue // a server error reply (NOPERM, NOAUTH...) still proves the server reachable
		}
		if s.endProbe(true) {
			s.cfg.logger.Info("coordkit/counter: server reachable again")
		}
		return
	}
}

// endProbe records that the probe goroutine is returning; reached says whether it reached the
// server, which makes the store connected again unless it was closed. It reports whether it did.
func (s *Store) endProbe(reached bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = false
	if reached && !s.closed.Load() {
		s.verified.Store(true)
		s.healthy.Store(true)
		return true
	}
	return false
}
