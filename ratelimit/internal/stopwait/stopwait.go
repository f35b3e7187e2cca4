// Package stopwait waits for a closed value's goroutines within a context, for the Close methods of
// package ratelimit and package denylist.
package stopwait

import (
	"context"
	"fmt"
	"sync"
)

// Wait waits for wg until ctx ends; it returns nil when wg's goroutines have ended (also when ctx
// ended at the same time), otherwise an error "ratelimit: close: " wrapping ctx.Err(). When ctx ends
// first, one goroutine keeps waiting for wg.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done:
			return nil
		default:
		}
		return fmt.Errorf("ratelimit: close: %w", ctx.Err())
	}
}
