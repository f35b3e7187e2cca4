package denylist

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/hooktest"
	"github.com/coordkit/coordkit/ratelimit/internal/denyaccess"
)

// hookedDenyList returns a DenyList over f whose hooks are a new Recorder, named "deny".
func hookedDenyList(t *testing.T, f *fakeSet) (*List, *hooktest.Recorder) {
	t.Helper()
	d := newTestDenyList(t, newFakeClock(), f, time.Minute, 8)
	rec := &hooktest.Recorder{}
	d.cfg.hooks, d.cfg.instance = luakit.Hooks{rec}, "deny"
	return d, rec
}

// isDeniedAsync runs IsDenied in a goroutine; its result arrives on the channel.
func isDeniedAsync(d *List, identity string) <-chan readAnswer {
	ch := make(chan readAnswer, 1)
	go func() {
		denied, err := d.IsDenied(context.Background(), identity)
		ch <- readAnswer{denied, err}
	}()
	return ch
}

// recvAnswer returns an IsDenied result, failing t when it does not arrive (a guard against a hang).
func recvAnswer(t *testing.T, ch <-chan readAnswer, want bool) {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil || a.denied != want {
			t.Fatalf("IsDenied = %v, %v; want %v, nil", a.denied, a.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("IsDenied did not return")
	}
}

// TestRejectedWriteKeepsCache: a SetDenied that the hook rejects changes nothing, the local
// cache included: the cached answer is still served without a read, and a read in flight can still
// be joined (an invalidation would have emptied the first and detached the second).
func TestRejectedWriteKeepsCache(t *testing.T) {
	f := &fakeSet{gated: true} // every read waits for its answer: call i is answered by f.release(i)
	d, rec := hookedDenyList(t, f)
	a := isDeniedAsync(d, "cached")
	f.release(t, 0, readAnswer{denied: true})
	recvAnswer(t, a, true)
	pending := isDeniedAsync(d, "pending") // read 1, left in flight
	waitFor(t, "the read of pending to start", func() bool { return f.numCalls() == 2 })
	rec.Take()

	rec.Reject(opWrite)
	for _, id := range []string{"cached", "pending"} {
		if err := d.SetDenied(context.Background(), id, false); err != hooktest.ErrRejected { //nolint:errorlint // returned unchanged
			t.Fatalf("SetDenied(%q) = %v, want the hook's rejection unchanged", id, err)
		}
	}
	rec.Reject()

	// A cache hit answers at once; after an invalidation this would be a read left waiting.
	hctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	denied, err := d.IsDenied(hctx, "cached")
	cancel()
	if err != nil || !denied {
		t.Fatalf("IsDenied(cached) after the rejected write = %v, %v; want the cached true", denied, err)
	}
	joined := isDeniedAsync(d, "pending")
	waitFor(t, "the second caller to join the read in flight", func() bool { return d.Stats().SharedReads == 1 })
	f.release(t, 1, readAnswer{denied: true})
	recvAnswer(t, pending, true)
	recvAnswer(t, joined, true)
	wantStats(t, d, 1, 3, 1, 2)
	if n := f.numCalls(); n != 2 {
		t.Fatalf("%d server reads, want 2: the rejected writes must not invalidate", n)
	}
	want := []string{
		"admit RATE LIMIT DENY LIST WRITE @deny", "admit RATE LIMIT DENY LIST WRITE @deny",
		"admit RATE LIMIT DENY LIST READ @deny", "done RATE LIMIT DENY LIST READ succeeded",
	}
	if got := rec.Take(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("journal %q, want it to start with %q", got, want)
	}
}

// TestScopePerCall: every IsDenied call on a hooked DenyList is its own operation: the
// caller that starts a shared read, a caller that joins it while pending, and a caller answered from
// the cache each get one admission and one completion.
func TestScopePerCall(t *testing.T) {
	f := &fakeSet{gated: true}
	d, rec := hookedDenyList(t, f)
	first := isDeniedAsync(d, "id")
	waitFor(t, "the shared read to start", func() bool { return f.numCalls() == 1 })
	joined := isDeniedAsync(d, "id")
	waitFor(t, "the second caller to join the pending read", func() bool { return d.Stats().SharedReads == 1 })
	f.release(t, 0, readAnswer{denied: true})
	recvAnswer(t, first, true)
	recvAnswer(t, joined, true)
	mustIsDenied(t, d, "id", true) // from the cache
	wantStats(t, d, 1, 2, 1, 1)

	got := rec.Take()
	count := func(entry string) int {
		n := 0
		for _, e := range got {
			if e == entry {
				n++
			}
		}
		return n
	}
	if len(got) != 6 || count("admit RATE LIMIT DENY LIST READ @deny") != 3 ||
		count("done RATE LIMIT DENY LIST READ succeeded") != 3 {
		t.Fatalf("journal %q: want three admissions and three successful completions, one per call", got)
	}
	// Both readers of the shared read were admitted before it answered; the cache hit came last.
	if !slices.Equal(got[:2], []string{"admit RATE LIMIT DENY LIST READ @deny", "admit RATE LIMIT DENY LIST READ @deny"}) ||
		!slices.Equal(got[4:], []string{"admit RATE LIMIT DENY LIST READ @deny", "done RATE LIMIT DENY LIST READ succeeded"}) {
		t.Fatalf("journal %q: want the two shared-read callers admitted first and the cache hit last", got)
	}
}

// TestBoundCheckOpensNoScope: the check a bound limiter makes (through denyaccess) is part of the
// limiter's call and runs no hook of the list, while IsDenied, the same read, is an operation.
func TestBoundCheckOpensNoScope(t *testing.T) {
	f := &fakeSet{members: map[string]bool{"id": true}}
	d, rec := hookedDenyList(t, f)
	denied, err := denyaccess.IsDenied(context.Background(), d, "id")
	if err != nil || !denied {
		t.Fatalf("bound check = %v, %v; want true, nil", denied, err)
	}
	if got := rec.Take(); len(got) != 0 {
		t.Fatalf("bound check journal %q, want none", got)
	}
	d.Invalidate()
	mustIsDenied(t, d, "id", true)
	if got := rec.Take(); !slices.Equal(got, []string{"admit RATE LIMIT DENY LIST READ @deny", "done RATE LIMIT DENY LIST READ succeeded"}) {
		t.Fatalf("IsDenied journal %q", got)
	}
}
