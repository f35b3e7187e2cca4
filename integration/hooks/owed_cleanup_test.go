package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// testLockOwedCleanupNotAdmitted: the release a lock acquisition owes when its outcome is uncertain
// (no reply before ctx ended) or its reply came after the local estimate (ErrLateReply) is part of
// the admitted LOCK TRY ACQUIRE and is never admitted itself. With a hook that rejects every LOCK
// RELEASE, the cleanup still reaches the server and removes the hold the acquisition wrote, and the
// hook sees no LOCK RELEASE. The server (on a cluster, the key's primary) is paused while the
// acquisition is sent, so that the acquisition runs, late, when it resumes; TryAcquire returns only
// once its cleanup was answered.
func testLockOwedCleanupNotAdmitted(t *testing.T, e *env) {
	j := &journal{}
	locker, err := lock.New(e.client(t), lock.WithHooks(j), lock.WithCleanupTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		timeout time.Duration // the acquisition's ctx; 0: none
		paused  time.Duration // the acquisition's ctx ends, or its estimate elapses, while paused
		want    error
	}{
		{name: "uncertain", ttl: time.Minute, timeout: 200 * time.Millisecond, paused: 400 * time.Millisecond, want: lock.ErrUncertain},
		{name: "late", ttl: time.Second, paused: 1300 * time.Millisecond, want: lock.ErrLateReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "owed-cleanup-" + tc.name
			leaseKey, _ := lock.Keys(name)
			node := e.Srv
			if e.IsCluster() {
				if node, err = e.Cluster.PrimaryOf(context.Background(), int(luakit.Slot(leaseKey))); err != nil {
					t.Fatal(err)
				}
			}
			// Load the scripts and dial the connection, so the acquisition is the only command paused.
			l, err := locker.TryAcquire(context.Background(), name, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			j.take()
			j.setReject("LOCK RELEASE")
			defer j.setReject()

			node.MustPause(t)
			defer resumeQuietly(node)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			}
			defer cancel()
			type result struct {
				l   *lock.Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := locker.TryAcquire(ctx, name, tc.ttl)
				done <- result{l, err}
			}()
			time.Sleep(tc.paused)
			node.MustResume(t)
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("TryAcquire did not return")
			}
			if r.l != nil || !errors.Is(r.err, tc.want) {
				t.Fatalf("TryAcquire = %v, %v; want no lease and %v", r.l, r.err, tc.want)
			}
			// Without the cleanup the hold would stay for its TTL (a minute, or a second from the
			// resume on).
			if exists(t, e.Raw, leaseKey) {
				t.Fatalf("the owed cleanup did not remove the hold (hook journal %q)", j.take())
			}
			got := j.take()
			if len(got) != 2 || got[0] != "admit LOCK TRY ACQUIRE" || !strings.HasPrefix(got[1], "done LOCK TRY ACQUIRE ") {
				t.Fatalf("hook journal %q: want the one LOCK TRY ACQUIRE and no LOCK RELEASE", got)
			}
		})
	}
}

// resumeQuietly resumes a paused server (resuming a running one does nothing), for a deferred cleanup
// after a failed assertion.
func resumeQuietly(s *testkit.Server) { _ = s.Resume() }
