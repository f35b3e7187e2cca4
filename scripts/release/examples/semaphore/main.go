// semaphore's README example: one of 4 permits, kept alive while the export runs.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/semaphore"
	"github.com/redis/rueidis"
)

var export = work

func example(ctx context.Context, client rueidis.Client) error {
	//README:code
}

func main() {
	runClient(example)
	fmt.Println("semaphore: README example ran: exported under a permit:", worked)
}
