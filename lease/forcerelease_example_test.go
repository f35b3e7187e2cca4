package lease_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lease"
)

// List the leases of a hash, then evict one whose holder is stuck.
func ExampleLeases_ForceRelease() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, _ := lease.New(client)
	ctx := context.Background()
	in, err := ls.Inspect(ctx, "workers")
	if err != nil || !in.Exists {
		return
	}
	deleted, err := ls.ForceRelease(ctx, "workers", in.Holders[0].Field)
	fmt.Println("deleted", in.Holders[0].Field, deleted, err)
}
