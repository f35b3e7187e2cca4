// lease's README example: a named lease in a hash field (needs Redis 7.4+ or Valkey 9+).

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

var doWork = work

func example(ctx context.Context) error {
	//README:code
}

func main() {
	run(example)
	fmt.Println("lease: README example ran: worked while holding worker:42:", worked)
}
