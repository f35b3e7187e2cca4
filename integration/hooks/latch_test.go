package hooks_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/latch"
)

// testLatchHooks checks that a Wait is one operation however many re-reads it makes, that an
// aborted generation is an answer, and that a rejected Create writes nothing.
func testLatchHooks(t *testing.T, e *env) {
	ctx := context.Background()
	j := &journal{}
	ls, err := latch.New(e.client(t), latch.WithHooks(j), latch.WithInstance("batch"),
		latch.WithRecheckInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	j.setReject("LATCH CREATE")
	if _, err := ls.Create(ctx, "l1", 2); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Create = %v", err)
	}
	if exists(t, e.Raw, "l1") {
		t.Fatal("a rejected Create wrote the latch")
	}
	j.setReject()
	l, err := ls.Create(ctx, "l1", 2)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, j, "admit LATCH CREATE", "admit LATCH CREATE", "done LATCH CREATE succeeded")

	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	// Let the wait re-read a few times (recheck every 5ms) before it can end: still one scope.
	waitCount(t, j, "admit LATCH WAIT", 1)
	time.Sleep(50 * time.Millisecond)
	for range 2 {
		if _, err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	// The waiter's completion and the second count-down's run on two goroutines: their order is not
	// defined, only that the wait ends after the second count-down was admitted.
	got := j.take()
	if len(got) == 5 && got[3] == "done LATCH WAIT succeeded" {
		got[3], got[4] = got[4], got[3]
	}
	if want := []string{"admit LATCH COUNT DOWN", "done LATCH COUNT DOWN succeeded",
		"admit LATCH COUNT DOWN", "done LATCH COUNT DOWN succeeded", "done LATCH WAIT succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("hook journal\n got %q\nwant %q (the last two in either order)", got, want)
	}

	l2, err := ls.Create(ctx, "l2", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Abort(ctx, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Wait(ctx); !errors.Is(err, latch.ErrAborted) {
		t.Fatalf("Wait on an aborted latch = %v", err)
	}
	if _, err := l2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, j, "admit LATCH CREATE", "done LATCH CREATE succeeded", "admit LATCH ABORT", "done LATCH ABORT succeeded",
		"admit LATCH WAIT", "done LATCH WAIT succeeded", "admit LATCH DELETE", "done LATCH DELETE succeeded")
}
