// otelhook's README example: a lock whose operations go through the OpenTelemetry hook.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/otelhook"
	"github.com/redis/rueidis"
)

func example(ctx context.Context, client rueidis.Client) error {
	//README:code
	if err != nil {
		return err
	}
	l, err := locker.TryAcquire(ctx, "invoice:43", 10*time.Second)
	if err != nil {
		return err
	}
	outcome, err := l.Release(ctx)
	fmt.Println("otelhook: README example ran: hooked lock acquired and", outcome)
	return err
}

func main() { runClient(example) }
