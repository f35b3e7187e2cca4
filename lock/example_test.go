package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// Take a fenced lock once and send its fencing token with the protected write. The lock's two keys
// are derived from its name: {invoice:42}:lease and {invoice:42}:fence, in one Cluster slot.
func ExampleLocker_TryAcquire() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	lk, err := lock.New(client)
	if err != nil {
		return
	}
	ctx := context.Background()
	lease, err := lk.TryAcquire(ctx, "invoice:42", 30*time.Second)
	if errors.Is(err, lock.ErrNotAcquired) {
		return // someone else holds it
	} else if err != nil {
		return
	}
	defer lease.Release(context.WithoutCancel(ctx))
	fmt.Println("fencing token", lease.FencingToken())
}

// Wait for a lock without polling: on a client from luakit.NewTrackedClient a waiter wakes when the
// holder releases (no option needed); elsewhere it wakes only when the holder's TTL passes.
func ExampleLocker_Acquire() {
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, luakit.NewTracker())
	if err != nil {
		return
	}
	defer client.Close()
	lk, err := lock.New(client, lock.WithKeyPrefix("billing:"))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := lk.Acquire(ctx, "invoice:42", 10*time.Second)
	if err != nil {
		return
	}
	defer lease.Release(context.Background())

	// Renew in the background; stop the work as soon as ownership is lost or uncertain.
	if err := lease.KeepAlive(ctx); err != nil {
		return
	}
	work := lease.Context()
	select {
	case <-work.Done():
		fmt.Println("lost:", context.Cause(work))
	case <-time.After(time.Second):
		fmt.Println("work done with token", lease.FencingToken())
	}
}

// An existing layout keeps its own two keys. With WithStrictSlots a pair that a Cluster would reject
// fails on a standalone server too, before any I/O, so the layout is fixed before it reaches a Cluster.
func ExampleLocker_TryAcquireKeys() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	lk, err := lock.New(client, lock.WithStrictSlots(true))
	if err != nil {
		return
	}
	ctx := context.Background()
	lease, err := lk.TryAcquireKeys(ctx, "{jobs:nightly}.lease", "{jobs:nightly}.fence", 30*time.Second)
	if errors.Is(err, luakit.ErrCrossSlot) {
		return // a layout such as "jobs:nightly:lease" / "jobs:nightly:fence" ends here
	} else if err != nil {
		return
	}
	defer lease.Release(context.WithoutCancel(ctx))
	fmt.Println("fencing token", lease.FencingToken())
}

// The keys a name stands for, for inspection or ACL key patterns.
func ExampleKeys() {
	leaseKey, fenceKey := lock.Keys("invoice:42")
	fmt.Println(leaseKey, fenceKey, luakit.Slot(leaseKey) == luakit.Slot(fenceKey))
	// Output: {invoice:42}:lease {invoice:42}:fence true
}

// Serve waiters in arrival order, with the lease handed to the next waiter by the release itself: the
// waiter needs no round trip of its own after the release. Leases are the same *lock.Lease.
func ExampleFairLocker_Acquire() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	fl, err := lock.NewFair(client, lock.WithWaitSlice(time.Second))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := fl.Acquire(ctx, "invoice:42", 10*time.Second) // queues behind earlier waiters
	if err != nil {
		return // ctx ended: the entry was removed (and a late grant handed on)
	}
	defer lease.Release(context.Background()) // grants the lease to the next live waiter
	fmt.Println("fencing token", lease.FencingToken())
}
