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
// The new value may equal the limit: with limit 500, the 500th unit is allowed and the 501st refused.
func ExampleStore_IncrementUpTo() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	store, err := counter.New(client, counter.WithKeyPrefix("quota:"))
	if err != nil {
		return
	}
	ctx := context.Background()
	defer store.Close(ctx)

	const failOpen = false // a hard quota: deny while the counter is unreachable
	res, err := store.IncrementUpTo(ctx, "tenant42", 1, 500, time.Hour)
	var allowed bool
	switch {
	case errors.Is(err, counter.ErrDisconnected):
		allowed = failOpen
	case err != nil:
		allowed = false
	default:
		allowed = res.Allowed
	}
	fmt.Println("allowed:", allowed, "used:", res.Value, "window ends in:", res.Remaining)
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
	ctx := context.Background()
	defer store.Close(ctx)
	vals, err := store.BatchIncrement(ctx, []counter.Increment{
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
	ctx := context.Background()
	defer store.Close(ctx)
	views, err := counter.NewBuffered(store, "views:home",
		counter.WithFlushInterval(time.Second), counter.WithFlushTTL(24*time.Hour))
	if err != nil {
		return
	}
	defer views.Close(ctx) // the final flush
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
	ctx := context.Background()
	defer store.Close(ctx)
	emails, err := counter.NewBounded(store, "emails:today", 10000,
		counter.WithChunk(100), counter.WithWindow(24*time.Hour))
	if err != nil {
		return
	}
	defer emails.Close(ctx) // gives unused headroom back
	ok, err := emails.TryAdd(ctx, 1)
	if err == nil && ok {
		fmt.Println("send")
	}
}
