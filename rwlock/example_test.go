package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/rwlock"
)

// Take a shared read lease; many readers may hold the key at once.
func ExampleLocker_TryAcquireRead() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	locks, err := rwlock.New(client)
	if err != nil {
		return
	}
	ctx := context.Background()
	lease, err := locks.TryAcquireRead(ctx, "account:42:rw", 30*time.Second)
	if errors.Is(err, rwlock.ErrNotAcquired) {
		return // a writer holds it; try-only, nothing queued
	} else if err != nil {
		return
	}
	defer lease.Close() // best-effort; use Release to learn the outcome

	// Renew explicitly before the lease expires; a failed or uncertain renewal ends lease.Context().
	if ok, err := lease.Extend(ctx); !ok || err != nil {
		return
	}
	fmt.Println(lease.Mode(), lease.Remaining() > 0)
}

// Readers keep being admitted while a writer waits, so a steady stream of readers can starve writers.
// Bound the writer's retries with backoff: 50ms doubling up to 2s, then give up.
func ExampleLocker_TryAcquireWrite() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	locks, err := rwlock.New(client)
	if err != nil {
		return
	}
	ctx := context.Background()
	for delay := 50 * time.Millisecond; ; delay *= 2 {
		lease, err := locks.TryAcquireWrite(ctx, "account:42:rw", 30*time.Second)
		if err == nil {
			// Exclusive work here, stopped when lease.Context() ends.
			out, err := lease.Release(context.WithoutCancel(ctx))
			fmt.Println(out, err)
			return
		}
		if !errors.Is(err, rwlock.ErrNotAcquired) {
			fmt.Println("write lease:", err)
			return
		}
		if delay > 2*time.Second {
			fmt.Println("write lease unavailable")
			return
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
	}
}
