// leader's README example: campaign, run the scheduled work once elected, then stop.

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordkit/leader"
	"github.com/redis/rueidis"
)

var (
	stopRun context.CancelFunc // ends the example's ctx once the work ran
	elected atomic.Int64       // the term's fencing token
)

func runScheduledWork(ctx context.Context, token int64) {
	elected.Store(token)
	stopRun()
}

func example(ctx context.Context, client rueidis.Client) error {
	ctx, stopRun = context.WithCancel(ctx)
	//README:code
}

func main() {
	runClient(example)
	fmt.Println("leader: README example ran: elected with fencing token", elected.Load())
}
