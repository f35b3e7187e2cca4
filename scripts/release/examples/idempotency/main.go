// idempotency's README example, run twice: the first request does the work, the second finds it done.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/redis/rueidis"
)

var (
	key    = "tenant-42:create-invoice:req-123"
	digest = "sha256:body-of-req-123"
)

func createInvoice(ctx context.Context) []byte { return []byte("invoice 42") }

func example(ctx context.Context, client rueidis.Client) error {
	//README:code
	fmt.Println("idempotency: README example ran: state", a.State)
	return nil
}

func main() {
	runClient(example)
	runClient(example)
}
