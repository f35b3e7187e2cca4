package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/redlock"
)

// connect returns one client per independent deployment; the caller closes them.
func connect(addrs ...string) []rueidis.Client {
	var out []rueidis.Client
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			log.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// A quorum lock over three independent servers. (Compile-only: it needs the servers.)
func Example() {
	clients := connect("node-a:6379", "node-b:6379", "node-c:6379")
	defer func() {
		for _, c := range clients {
			c.Close() // the group never closes them
		}
	}()
	group, err := redlock.NewGroup(clients)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	l, err := group.TryAcquire(ctx, "invoice:42", 10*time.Second)
	if errors.Is(err, redlock.ErrNotAcquired) {
		return // someone else holds it; err lists what each node said
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	fmt.Println("estimated validity:", l.Remaining().Round(time.Second))
	// Complete the protected work within l.Remaining(); l.Context() ends when the estimate does.
}

// Fenced mode: the protected resource rejects writes whose token is lower than the highest it has
// accepted. (Compile-only.)
func ExampleWithFencing() {
	clients := connect("node-a:6379", "node-b:6379", "node-c:6379", "node-d:6379", "node-e:6379")
	group, err := redlock.NewGroup(clients, redlock.WithFencing("invoices:fence"), redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := group.Acquire(ctx, "invoice:42", 10*time.Second) // retries with jitter until ctx ends
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	fmt.Println("write with fencing token", l.FencingToken())
}

// Release reports what a quorum of nodes said; when fewer than a quorum replied it returns an error
// wrapping ErrUncertain, and sending it again settles the lock. (Compile-only.)
func ExampleLease_Release() {
	var l *redlock.Lease // from TryAcquire
	outcome, err := l.Release(context.Background())
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			log.Printf("node %d (%s) did not reply: %v", n.Index, n.Addr, n.Err)
		}
		outcome, err = l.Release(context.Background()) // retry later: Released, AlreadyReleased or NotOwned
	}
	if err == nil && outcome == redlock.NotOwned {
		log.Print("the lock had expired before the release")
	}
}

// KeepAlive renews the lock on a quorum every TTL/3 until the work is done; the work watches the
// lock's context, which ends if the lock is lost or its validity elapses. (Compile-only.)
func ExampleLease_KeepAlive() {
	var l *redlock.Lease // from TryAcquire
	defer l.Close()      // stops the keep-alive too
	if err := l.KeepAlive(context.Background()); err != nil {
		return // the lock already ended
	}
	work := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	if err := work(l.Context()); err != nil {
		log.Printf("stopped: %v", context.Cause(l.Context()))
	}
}

// Verify asks the nodes whether a quorum still holds this owner's token, without renewing it.
// (Compile-only.)
func ExampleLease_Verify() {
	var l *redlock.Lease // from TryAcquire
	held, err := l.Verify(context.Background())
	switch {
	case errors.Is(err, redlock.ErrUncertain):
		log.Printf("no quorum either way: %v", err) // the lock keeps its estimate
	case err == nil && !held:
		log.Printf("lost: %v", l.Err()) // redlock.ErrLost, or the lock had already ended
	}
}

// NewGroup validates the group before any I/O: an odd number of at least three independent clients.
// Like every bad argument, a wrong count also matches ErrInvalidConfig.
func ExampleNewGroup() {
	_, err := redlock.NewGroup(nil)
	fmt.Println(errors.Is(err, redlock.ErrNodeCount), errors.Is(err, redlock.ErrInvalidConfig))
	// Output: true true
}
