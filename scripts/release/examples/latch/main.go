// latch's README example: create a latch of 3 and wait; three count-downs come from a "worker".

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/latch"
	"github.com/redis/rueidis"
)

// worker joins batch:42 once it exists and counts it down three times.
func worker(ctx context.Context, client rueidis.Client) {
	ls, err := latch.New(client)
	if err != nil {
		fail(err)
	}
	for ctx.Err() == nil {
		j, err := ls.Join(ctx, "batch:42")
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for range 3 {
			if _, err := j.CountDown(ctx); err != nil {
				fail(err)
			}
		}
		return
	}
}

func example(ctx context.Context, client rueidis.Client) error {
	go worker(ctx, client)
	//README:code
	return err
}

func main() {
	runClient(example)
	fmt.Println("latch: README example ran: Wait returned at zero")
}
