package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/rwlock"
)

// Take a shared read lease if no writer holds the key; many readers may hold it at once.
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
		return // a writer holds it; nothing was written
	} else if err != nil {
		return
	}
	defer lease.Close() // best-effort, failures are logged; use Release to learn the outcome

	// Renew explicitly before the lease expires; a renewal that finds the entry gone ends lease.Context().
	if ok, err := lease.Extend(ctx); !ok || err != nil {
		return
	}
	fmt.Println(lease.Mode(), lease.Remaining() > 0)
}

// Wait for the write lease without polling: on a client built by luakit.NewTrackedClient the waiter
// wakes when a reader releases. Readers can keep a waiting writer out, so bound the wait with ctx.
func ExampleLocker_AcquireWrite() {
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, luakit.NewTracker())
	if err != nil {
		return
	}
	defer client.Close()
	locks, err := rwlock.New(client)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := locks.AcquireWrite(ctx, "account:42:rw", 30*time.Second)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("readers held the key for 10s")
		return
	} else if err != nil {
		return
	}
	// Renew in the background until Release.
	if err := lease.KeepAlive(context.Background()); err != nil {
		return
	}
	// Exclusive work here, under a context derived from lease.Context(), so it stops if the lease ends.
	out, err := lease.Release(context.Background())
	fmt.Println(out, err)
}
