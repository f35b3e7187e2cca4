// rwlock's README example: a write lease with keep-alive.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/redis/rueidis"
)

var (
	addrs = []string{serverAddr()}
	write = work
)

func example(ctx context.Context) error {
	//README:code
}

func main() {
	run(example)
	fmt.Println("rwlock: README example ran: wrote under the write lease:", worked)
}
