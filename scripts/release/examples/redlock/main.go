// redlock's README example: a fenced quorum lock over five nodes, here five logical databases of
// one server (enough for the example's quorum; not a deployment to copy). store, data: common.go.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/redlock"
	"github.com/redis/rueidis"
)

func example(ctx context.Context, a, b, c, d, e rueidis.Client) error {
	//README:code
}

func main() {
	var nodes []rueidis.Client
	for db := range 5 {
		nodes = append(nodes, newClient(db))
		defer nodes[db].Close()
	}
	run(func(ctx context.Context) error { return example(ctx, nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]) })
	fmt.Printf("redlock: README example ran: %d write(s) with fencing token %d\n", store.writes, store.highest)
}
