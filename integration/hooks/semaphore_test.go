package hooks_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/coordkit/coordkit/semaphore"
)

// testSemaphoreHooks checks the names and the rejection rules of a permit's Close and of Inspect.
func testSemaphoreHooks(t *testing.T, e *env) {
	client := e.client(t)
	ctx := context.Background()
	j := &journal{}
	s, err := semaphore.New(client, "sem-hooks", 2, semaphore.WithHooks(j), semaphore.WithName("exports"),
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
		before := commands(t, e)
		if err := p.Close(); err != errRejected { //nolint:errorlint // the rejection is returned unchanged
			t.Fatalf("Close = %v, want the rejection unchanged", err)
		}
		if err := s.Close(ctx); err != nil { // waits for any background retry
			t.Fatal(err)
		}
		if after := commands(t, e); !maps.Equal(before, after) {
			t.Fatalf("a rejected Close sent commands: before %v after %v", before, after)
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

	t.Run("inspect", func(t *testing.T) {
		if _, err := semaphore.Inspect(ctx, client, "sem-hooks", semaphore.WithHooks(j), semaphore.WithName("exports")); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit SEMAPHORE INSPECT", "done SEMAPHORE INSPECT succeeded")
	})
}
