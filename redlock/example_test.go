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

// Release reports whether a quorum of nodes replied; on false the handle keeps its token for a retry.
// (Compile-only.)
func ExampleLock_Release() {
	var l *redlock.Lock // from TryAcquire
	ok, err := l.Release(context.Background())
	var qe *redlock.QuorumError
	if !ok && errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			log.Printf("node %d (%s) did not reply: %v", n.Index, n.Addr, n.Err)
		}
		_, _ = l.Release(context.Background()) // retry later
	}
}

// Renew before the validity runs out; a renewal no quorum confirms ends the lease. (Compile-only.)
func ExampleLock_Renew() {
	var l *redlock.Lock // from TryAcquire
	ticker := time.NewTicker(l.TTL() / 3)
	defer ticker.Stop()
	for {
		select {
		case <-l.Done():
			return
		case <-ticker.C:
			if ok, err := l.Renew(context.Background()); !ok {
				log.Printf("lease ended: %v", err)
				return
			}
		}
	}
}

// NewGroup validates the group before any I/O: an odd number of at least three independent clients.
func ExampleNewGroup() {
	_, err := redlock.NewGroup(nil)
	fmt.Println(errors.Is(err, redlock.ErrNodeCount))
	// Output: true
}
