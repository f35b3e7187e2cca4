package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// Take a named lease once; another worker holding the same field makes it fail with ErrNotAcquired.
func ExampleLeases_TryAcquire() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	leases, err := lease.New(client)
	if err != nil {
		return
	}
	ctx := context.Background()
	l, err := leases.TryAcquire(ctx, "coordination:leases", "worker:42", 30*time.Second)
	switch {
	case errors.Is(err, lease.ErrNotAcquired):
		return // someone else holds worker:42
	case errors.Is(err, luakit.ErrUnsupported):
		fmt.Println(err) // needs Redis 7.4+ or Valkey 9.0+
		return
	case err != nil:
		return
	}
	defer l.Release(context.WithoutCancel(ctx))
	fmt.Println("holding", l.Name())
}

// Wait for a named lease without polling, keep it renewed in the background, and stop the work when
// ownership ends.
func ExampleLeases_Acquire() {
	tracker := luakit.NewTracker()
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, tracker)
	if err != nil {
		return
	}
	defer client.Close()
	leases, err := lease.New(client, lease.WithKeyPrefix("billing:")) // the tracker is found on the client
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := leases.Acquire(ctx, "coordination:leases", "worker:42", 9*time.Second)
	if err != nil {
		return
	}
	defer l.Release(context.WithoutCancel(ctx)) // also stops the keep-alive
	if err := l.KeepAlive(ctx); err != nil {
		return
	}
	select {
	case <-l.Done():
		fmt.Println("stop work:", l.Err()) // lease.ErrLost or lease.ErrExpired
	case <-ctx.Done():
	}
}

// Renew explicitly instead of with KeepAlive: a false result means the lease ended; stop the work.
func ExampleLease_Extend() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	leases, err := lease.New(client)
	if err != nil {
		return
	}
	ctx := context.Background()
	l, err := leases.TryAcquire(ctx, "coordination:leases", "worker:42", 9*time.Second)
	if err != nil {
		return
	}
	defer l.Release(ctx)
	renew := time.NewTicker(3 * time.Second)
	defer renew.Stop()
	for range 3 {
		<-renew.C
		rctx, cancel := context.WithDeadline(ctx, l.Deadline()) // a renewal is worth nothing later
		ok, err := l.Extend(rctx)
		cancel()
		switch {
		case ok:
		case errors.Is(err, lease.ErrUncertain):
			continue // the lease still vouches until its previous estimate; try again
		default:
			fmt.Println("stop work:", l.Err(), err)
			return
		}
	}
}

// List who holds the named leases of a hash, with their remaining life (owner tokens are never shown).
func ExampleLeases_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	leases, err := lease.New(client)
	if err != nil {
		return
	}
	in, err := leases.Inspect(context.Background(), "coordination:leases")
	if err != nil {
		return
	}
	for _, h := range in.Holders {
		fmt.Printf("%s expires in %v\n", h.Field, h.Remaining)
	}
}

// Release outcomes have stable names, suitable as metric attributes.
func ExampleReleaseOutcome_String() {
	for _, o := range []lease.ReleaseOutcome{lease.Released, lease.AlreadyReleased, lease.NotOwned} {
		fmt.Println(o)
	}
	// Output:
	// released
	// already_released
	// not_owned
}
