package latch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/latch"
)

// A coordinator creates a latch for three workers and waits for them.
func ExampleLatches_Create() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, err := latch.New(client, latch.WithKeyPrefix("jobs:"))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	l, err := ls.Create(ctx, "batch:42", 3, latch.WithExpiry(10*time.Minute))
	if errors.Is(err, latch.ErrExists) {
		return // another coordinator runs this batch
	} else if err != nil {
		return
	}
	defer l.Delete(context.WithoutCancel(ctx))

	err = l.Wait(ctx)
	var aborted *latch.AbortedError
	switch {
	case err == nil:
		fmt.Println("all workers finished")
	case errors.As(err, &aborted):
		fmt.Println("batch aborted:", aborted.Reason)
	case errors.Is(err, latch.ErrLatchExpired):
		fmt.Println("batch timed out")
	case errors.Is(err, latch.ErrReplaced):
		fmt.Println("the batch was reset or deleted")
	default:
		fmt.Println("wait:", err)
	}
}

// A worker joins the current generation and signals once when its part is done.
func ExampleLatches_Join() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, _ := latch.New(client, latch.WithKeyPrefix("jobs:"))
	ctx := context.Background()

	l, err := ls.Join(ctx, "batch:42")
	if errors.Is(err, latch.ErrNotFound) {
		return // no batch running
	} else if err != nil {
		return
	}
	if err := doWork(); err != nil {
		_ = l.Abort(ctx, "worker failed")
		return
	}
	remaining, err := l.CountDown(ctx)
	switch {
	case err == nil:
		fmt.Println("remaining", remaining)
	case errors.Is(err, latch.ErrUncertain):
		// The signal may or may not have counted: do not send it again blindly.
	case errors.Is(err, latch.ErrReplaced):
		fmt.Println("the batch was reset; this signal belonged to the old one")
	}
}

func doWork() error { return nil }

// Reset starts a new generation; waiters of the old one return ErrReplaced and its late signals are
// refused with ErrReplaced.
func ExampleLatches_Reset() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, _ := latch.New(client)
	ctx := context.Background()
	l, err := ls.Reset(ctx, "nightly", 5)
	if err != nil {
		return
	}
	fmt.Println("generation", l.Generation(), "count", l.Initial())
}
