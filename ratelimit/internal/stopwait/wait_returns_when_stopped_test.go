package stopwait

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// Wait returns nil once the goroutines have ended, and an error wrapping ctx.Err() while they run.
func TestWaitReturnsWhenStopped(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, &wg); !errors.Is(err, context.Canceled) || err.Error() != "ratelimit: close: context canceled" {
		t.Fatalf("Wait while running = %v, want ratelimit: close: context canceled", err)
	}
	close(release)
	if err := Wait(context.Background(), &wg); err != nil {
		t.Fatalf("Wait after the goroutines ended = %v", err)
	}
}
