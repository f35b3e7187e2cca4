package hooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// BenchmarkLockNoHooks is one TryAcquire and one Release on a real server without hooks: compare its
// allocs/op with the same benchmark before hooks existed (the adapter README states the figures).
func BenchmarkLockNoHooks(b *testing.B) {
	srv := testkit.Start(b, testkit.Targets()[0])
	locker, err := lock.New(srv.Client(b))
	if err != nil {
		b.Fatal(err)
	}
	benchLock(b, locker)
}

func benchLock(b *testing.B, locker *lock.Locker) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := locker.TryAcquire(ctx, "bench", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
