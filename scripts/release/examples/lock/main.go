// lock's README example: acquire, keep alive, write with the fencing token (store, data: common.go),
// release.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

func example(ctx context.Context) error {
	//README:code
}

func main() {
	run(example)
	fmt.Printf("lock: README example ran: %d write(s) with fencing token %d\n", store.writes, store.highest)
}
