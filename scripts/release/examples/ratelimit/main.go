// ratelimit's README example: one GCRA decision.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/redis/rueidis"
)

func example(ctx context.Context, client rueidis.Client) error {
	//README:code
	fmt.Printf("ratelimit: README example ran: allowed %v, remaining %d\n", res.Allowed, res.Remaining)
	return nil
}

func main() { runClient(example) }
