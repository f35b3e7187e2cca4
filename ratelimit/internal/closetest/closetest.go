// Package closetest checks, in the unit tests of package ratelimit and package denylist, a Close that
// waits for background work (see stopwait.Wait).
package closetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Waits checks closeFn, a Close whose background work ends only when release is closed: with the work
// still running it returns a "ratelimit: " error wrapping ctx.Err() once ctx ends (20ms), after (a
// call that must then fail) fails with luakit.ErrClosed, and once the work ends a second Close
// returns nil.
func Waits(t testing.TB, closeFn func(context.Context) error, release chan struct{}, after func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := closeFn(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "ratelimit: ") {
		t.Fatalf("Close with work still running = %v, want a ratelimit: error wrapping ctx.Err()", err)
	}
	if err := after(); !errors.Is(err, luakit.ErrClosed) {
		t.Fatalf("call after a timed-out Close = %v, want ErrClosed", err)
	}
	close(release)
	if err := closeFn(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
