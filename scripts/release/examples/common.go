// Shared by every README example that scripts/release-check.sh builds and runs (copied beside it):
// the server's client, a bounded context, and what the README blocks use without defining it.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/rueidis"
)

// serverAddr is the server that scripts/release-check.sh started for the examples.
func serverAddr() string { return os.Getenv("COORDKIT_EXAMPLE_ADDR") }

// newClient connects to serverAddr, on logical database db.
func newClient(db int) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{serverAddr()}, SelectDB: db})
	if err != nil {
		fail(err)
	}
	return c
}

// run calls f with a context that ends after 30 seconds and exits with status 1 if f fails.
func run(f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		fail(err)
	}
}

// runClient is run with a client of serverAddr (database 0).
func runClient(f func(ctx context.Context, client rueidis.Client) error) {
	client := newClient(0)
	defer client.Close()
	run(func(ctx context.Context) error { return f(ctx, client) })
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "README example failed:", err)
	os.Exit(1)
}

// worked records that work ran with a live context.
var worked bool

// work stands for a README block's unit of work (doWork, write, export).
func work(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	worked = true
	return nil
}

// fencedStore is the README blocks' store: it refuses a write whose token is below the highest it saw.
type fencedStore struct {
	highest int64
	writes  int
}

func (s *fencedStore) Write(ctx context.Context, token int64, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if token < s.highest {
		return errors.New("stale fencing token")
	}
	s.highest, s.writes = token, s.writes+1
	return nil
}

var (
	store = &fencedStore{}
	data  = []byte("invoice 42: paid")
)
