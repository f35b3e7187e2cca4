// counter's README example: a bounded increment in a fixed window.

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/counter"
	"github.com/redis/rueidis"
)

const failOpen = false

func example(ctx context.Context, client rueidis.Client) error {
	var allowed bool
	//README:code
	fmt.Println("counter: README example ran: allowed", allowed)
	return nil
}

func main() { runClient(example) }
