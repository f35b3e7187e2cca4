package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

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
	defer sem.Shutdown(context.Background()) // waits for background cleanups of closed permits

	ctx := context.Background()
	permit, err := sem.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, semaphore.ErrNotAcquired) {
		return // four exports are running
	} else if err != nil {
		return
	}
	defer permit.Close() // best effort, retried in the background

	// Renew before the permit runs out; a failed renewal surrenders it.
	if ok, err := permit.Extend(ctx, 30*time.Second); !ok || err != nil {
		return
	}
	fmt.Println("exporting; permit ends in at most", permit.Remaining().Round(time.Second))
}

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
	permit, err := sem.TryAcquire(ctx, semaphore.NoExpiry) // lasts until released: prefer a finite TTL
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
