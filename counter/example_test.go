package counter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/counter"
)

// A quota check where the caller decides what an unreachable server means: fail open (allow) for a
// soft limit, fail closed (deny) for a hard one. While disconnected the call returns at once.
func ExampleStore_IncrementIfLessThan() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	store, err := counter.New(client, counter.WithKeyPrefix("quota:"))
	if err != nil {
		return
	}
	defer store.Close()

	const failOpen = false // a hard quota: deny while the counter is unreachable
	res, err := store.IncrementIfLessThan(context.Background(), "tenant42", 1, 500, time.Hour)
	var allowed bool
	switch {
	case errors.Is(err, counter.ErrDisconnected):
		allowed = failOpen
	case err != nil:
		allowed = false
	default:
		allowed = res.Allowed
	}
	fmt.Println("allowed:", allowed, "used:", res.Value, "window ends in:", res.TTL)
}

// Increment many counters in one round trip; results come back in input order.
func ExampleStore_BatchIncrement() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	store, err := counter.New(client)
	if err != nil {
		return
	}
	defer store.Close()
	vals, err := store.BatchIncrement(context.Background(), []counter.Increment{
		{Key: "views:home", Delta: 10, TTL: 24 * time.Hour},
		{Key: "views:about", Delta: 2, TTL: 24 * time.Hour},
	})
	var be *counter.BatchError
	if errors.As(err, &be) {
		for i, e := range be.Errs {
			if e != nil {
				fmt.Println("item", i, "failed:", e)
			}
		}
	}
	fmt.Println(vals)
}

// Count page views on a hot path without a round trip per view; flushed every second and on Close.
func ExampleNewBuffered() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	store, err := counter.New(client)
	if err != nil {
		return
	}
	defer store.Close()
	views, err := counter.NewBuffered(store, "views:home", counter.BufferedOptions{FlushInterval: time.Second})
	if err != nil {
		return
	}
	defer views.Close(context.Background()) // the final flush
	for range 1000 {
		_ = views.Add(1) // no I/O
	}
}

// Share a global limit between processes with few round trips: each reserves headroom in chunks,
// so the global value never exceeds the limit.
func ExampleNewBounded() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	store, err := counter.New(client)
	if err != nil {
		return
	}
	defer store.Close()
	ctx := context.Background()
	emails, err := counter.NewBounded(store, "emails:today", 10000, counter.BoundedOptions{Chunk: 100, TTL: 24 * time.Hour})
	if err != nil {
		return
	}
	defer emails.Close(ctx) // gives unused headroom back
	ok, err := emails.TryAdd(ctx, 1)
	if err == nil && ok {
		fmt.Println("send")
	}
}
