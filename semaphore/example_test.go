package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/semaphore"
)

// Share four permits for an export job: each worker takes a permit at once or skips the job.
func ExampleSemaphore_TryAcquire() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	sem, err := semaphore.New(client, "export:permits", 4)
	if err != nil {
		return
	}
	defer sem.Close(context.Background()) // waits for background cleanups of closed permits

	ctx := context.Background()
	permit, err := sem.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, semaphore.ErrNotAcquired) {
		return // four exports are running
	} else if err != nil {
		return
	}
	defer permit.Close() // best effort, retried in the background

	// Renew before the permit runs out (at its current TTL); false means it ended: stop.
	if ok, err := permit.Extend(ctx); !ok || err != nil {
		return
	}
	fmt.Println("exporting; permit ends in at most", permit.Remaining().Round(time.Second))
}

// Wait for one of four permits, keep it renewed while working, and stop the work if it is lost.
func ExampleSemaphore_Acquire() {
	tracker := luakit.NewTracker() // wakes waiters on client-side-caching invalidations
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, tracker)
	if err != nil {
		return
	}
	defer client.Close()
	sem, err := semaphore.New(client, "export:permits", 4)
	if err != nil {
		return
	}
	defer sem.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	permit, err := sem.Acquire(ctx, 30*time.Second) // sleeps until a permit is released or expires
	if err != nil {
		return // ctx ended, or a non-retryable error
	}
	defer permit.Close()
	if err := permit.KeepAlive(ctx); err != nil {
		return
	}
	export(permit.Context()) // cancelled if the permit is lost or its local estimate elapses
}

func export(context.Context) {}

// Release a permit and act on the outcome; retry an unconfirmed release.
func ExamplePermit_Release() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	sem, err := semaphore.New(client, "reports:permits", 2, semaphore.WithKeyPrefix("app:"))
	if err != nil {
		return
	}
	ctx := context.Background()
	permit, err := sem.TryAcquireNoExpiry(ctx) // lasts until released: prefer a finite TTL
	if err != nil {
		return
	}
	for range 3 {
		outcome, err := permit.Release(ctx)
		if errors.Is(err, semaphore.ErrUncertain) {
			continue // ownership unknown: retry the release
		}
		fmt.Println(outcome)
		return
	}
}
