package counter

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// hanging is a rueidis.Client whose every command blocks until its context ends and then fails with
// the context's error: a server that never answers.
type hanging struct {
	rueidis.Client
	started atomic.Int64
}

func (*hanging) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (*hanging) B() rueidis.Builder       { return rueidis.Builder{} }

func (c *hanging) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.started.Add(1)
	<-ctx.Done()
	return rueidis.NewErrorResult(ctx.Err())
}

// slot0Key returns a key of Cluster slot 0: the zero rueidis.Builder that hanging hands out accepts
// only keys of slot 0.
func slot0Key() string {
	for i := 0; ; i++ {
		if k := "ck" + strconv.Itoa(i); luakit.Slot(k) == 0 {
			return k
		}
	}
}

// quiet discards the store's connectivity log lines.
var quiet = WithLogger(slog.New(slog.DiscardHandler))

func waitStarted(t *testing.T, c *hanging) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.started.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no command was sent")
		}
		time.Sleep(time.Millisecond)
	}
}

// closeWithin runs close with a context ending after 50ms and fails the test unless it returns an
// error matching context.DeadlineExceeded well within a second.
func closeWithin(t *testing.T, close func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- close(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want one matching context.DeadlineExceeded", err)
		}
		t.Logf("Close returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(time.Second):
		t.Fatal("Close did not return when its ctx ended")
	}
}

// A Buffered whose background flush hangs: Close waits for it until ctx ends, then stops it and
// returns ctx's error; the goroutine has ended (goleak) and later calls fail with ErrClosed.
func TestBufferedCloseEndsWithCtx(t *testing.T) {
	c := &hanging{}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s.verified.Store(true) // a warm store: the write hangs, not the EXISTS before a first call
	b, err := NewBuffered(s, slot0Key(), WithFlushInterval(time.Millisecond), WithFlushTimeout(time.Hour),
		WithFlushErrorHandler(func(error) {}))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1); err != nil {
		t.Fatal(err)
	}
	waitStarted(t, c)
	closeWithin(t, b.Close)
	if err := b.Add(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
	if err := b.Flush(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close = %v", err)
	}
	// The cancelled flush was uncertain, so nothing is pending: a second Close has nothing to send.
	if err := b.Close(context.Background()); err != nil || b.Pending() != 0 {
		t.Fatalf("second Close = %v, pending %d", err, b.Pending())
	}
}

// A Bounded whose reservation hangs: Close waits for it until ctx ends and returns ctx's error.
func TestBoundedCloseEndsWithCtx(t *testing.T) {
	c := &hanging{}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s.verified.Store(true) // a warm store: the write hangs, not the EXISTS before a first call
	b, err := NewBounded(s, slot0Key(), 100)
	if err != nil {
		t.Fatal(err)
	}
	addCtx, stopAdd := context.WithCancel(context.Background())
	added := make(chan error, 1)
	go func() { _, err := b.TryAdd(addCtx, 1); added <- err }()
	waitStarted(t, c)
	closeWithin(t, b.Close)
	stopAdd()
	if err := <-added; !errors.Is(err, ErrUncertain) {
		t.Fatalf("cancelled TryAdd = %v, want ErrUncertain", err)
	}
	if _, err := b.TryAdd(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryAdd after Close = %v", err)
	}
	if err := b.Flush(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close = %v", err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// stuck is a rueidis.Client whose every command blocks until release is closed, whatever its
// context: a probe Close cannot cut short.
type stuck struct {
	hanging
	release chan struct{}
}

func (c *stuck) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	c.started.Add(1)
	<-c.release
	return rueidis.NewErrorResult(context.Canceled)
}

// Store.Close cancels a probe in flight and waits for its goroutine to return until ctx ends; later
// calls fail with ErrClosed, and a later Close returns nil once the probe has ended.
func TestStoreClose(t *testing.T) {
	t.Run("cancels the probe", func(t *testing.T) {
		c := &hanging{}
		s, err := New(c, WithProbeInterval(time.Millisecond), WithProbeTimeout(time.Hour), quiet)
		if err != nil {
			t.Fatal(err)
		}
		s.markDown(slot0Key())
		waitStarted(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close = %v", err)
		}
		if s.Connected() {
			t.Fatal("a closed store is not connected")
		}
	})
	t.Run("ends with ctx", func(t *testing.T) {
		c := &stuck{release: make(chan struct{})}
		s, err := New(c, WithProbeInterval(time.Millisecond), quiet)
		if err != nil {
			t.Fatal(err)
		}
		s.markDown(slot0Key())
		waitStarted(t, &c.hanging)
		closeWithin(t, s.Close)
		close(c.release)
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		if s.Connected() {
			t.Fatal("a probe ending after Close must not make the store connected")
		}
	})
}
