package hooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/semaphore"
)

// testSemaphoreHooks checks the names and the rejection rules of a permit's Close and of Inspect.
func testSemaphoreHooks(t *testing.T, e *env) {
	client := e.client(t)
	ctx := context.Background()
	j := &journal{}
	s, err := semaphore.New(client, "sem-hooks", 2, semaphore.WithHooks(j), semaphore.WithInstance("exports"),
		semaphore.WithCleanupRetryWindow(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("close_is_one_close", func(t *testing.T) {
		p, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit SEMAPHORE TRY ACQUIRE", "done SEMAPHORE TRY ACQUIRE succeeded",
			"admit SEMAPHORE CLOSE", "done SEMAPHORE CLOSE succeeded")
	})

	// A rejected Close sends nothing, keeps the permit and starts no background retry: the caller
	// gets the rejection and can call Close again.
	t.Run("rejected_close_keeps_the_permit", func(t *testing.T) {
		p, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j.setReject("SEMAPHORE CLOSE", "SEMAPHORE RELEASE")
		before := e.CommandStats(t)
		if err := p.Close(); err != errRejected { //nolint:errorlint // the rejection is returned unchanged
			t.Fatalf("Close = %v, want the rejection unchanged", err)
		}
		if err := s.Close(ctx); err != nil { // waits for any background retry
			t.Fatal(err)
		}
		if d := e.CommandsSince(t, before); len(d) != 0 {
			t.Fatalf("a rejected Close sent commands: %v", d)
		}
		j.setReject()
		if p.Err() != nil {
			t.Fatalf("a rejected Close ended the permit: %v", p.Err())
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit SEMAPHORE TRY ACQUIRE", "done SEMAPHORE TRY ACQUIRE succeeded",
			"admit SEMAPHORE CLOSE", "admit SEMAPHORE CLOSE", "done SEMAPHORE CLOSE succeeded")
	})

	// An admitted Close whose release gets no answer (every node pauses writes for longer than the
	// cleanup timeout) is retried in the background: the retries are cleanup owed after the admitted
	// Close, so the hooks see that one CLOSE and no RELEASE, and the permit is gone once they answer.
	t.Run("owed_release_is_not_readmitted", func(t *testing.T) {
		s, err := semaphore.New(client, "sem-hooks-owed", 1, semaphore.WithHooks(j),
			semaphore.WithCleanupTimeout(50*time.Millisecond), semaphore.WithCleanupRetryWindow(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		admin := e.client(t)
		for addr, node := range admin.Nodes() {
			if err := node.Do(ctx, node.B().ClientPause().Timeout(400).Write().Build()).Error(); err != nil {
				t.Fatalf("CLIENT PAUSE on %s: %v", addr, err)
			}
		}
		if err := p.Close(); err == nil {
			t.Fatal("Close answered although every node paused writes past the cleanup timeout")
		}
		inspector, err := semaphore.New(admin, "sem-hooks-owed", 1) // no hooks: the journal stays the Close's
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			in, err := inspector.Inspect(ctx)
			if err == nil && len(in.Permits) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the background release never removed the permit: %+v, %v", in, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// The Close's completion is canceled or failed by how its cleanup timeout ended the wait (the
		// server's version decides whether the paused write errs first); either way exactly one.
		got := j.take()
		want := []string{"admit SEMAPHORE TRY ACQUIRE", "done SEMAPHORE TRY ACQUIRE succeeded", "admit SEMAPHORE CLOSE"}
		if len(got) != 4 || !slices.Equal(got[:3], want) ||
			(got[3] != "done SEMAPHORE CLOSE canceled" && got[3] != "done SEMAPHORE CLOSE failed") {
			t.Fatalf("hook journal\n got %q\nwant %q and one CLOSE completion (canceled or failed), no RELEASE", got, want)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		s, err := semaphore.New(client, "sem-hooks", 2, semaphore.WithHooks(j), semaphore.WithInstance("exports"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inspect(ctx); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit SEMAPHORE INSPECT", "done SEMAPHORE INSPECT succeeded")
	})
}
