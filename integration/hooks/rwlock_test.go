package hooks_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/rwlock"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testRWLockRejectedClose: a rejected Close returns the hook's error, keeps the lease and logs no
// failed release (nothing was attempted); Close can then be called again.
func testRWLockRejectedClose(t *testing.T, e *env) {
	ctx := context.Background()
	j := &journal{}
	var logs syncBuffer
	l, err := rwlock.New(e.client(t), rwlock.WithHooks(j),
		rwlock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.TryAcquireWrite(ctx, "rw-reject-close", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	j.setReject("RWLOCK CLOSE")
	if err := h.Close(); err != errRejected { //nolint:errorlint // the rejection is returned unchanged
		t.Fatalf("Close = %v, want the rejection unchanged", err)
	}
	if h.Err() != nil {
		t.Fatalf("a rejected Close ended the lease: %v", h.Err())
	}
	if s := logs.String(); s != "" {
		t.Fatalf("a rejected Close logged a failed release:\n%s", s)
	}
	j.setReject()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, j, "admit RWLOCK TRY ACQUIRE WRITE", "done RWLOCK TRY ACQUIRE WRITE succeeded",
		"admit RWLOCK CLOSE", "admit RWLOCK CLOSE", "done RWLOCK CLOSE succeeded")
}
