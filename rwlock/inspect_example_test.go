package rwlock_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/rwlock"
)

// See who holds a read-write lock: the mode and each holder's remaining life (never owner tokens).
func ExampleLocker_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	locks, _ := rwlock.New(client)
	in, err := locks.Inspect(context.Background(), "account:42:rw")
	if err != nil {
		return
	}
	fmt.Println("mode", in.Mode, "readers", len(in.Readers), "writer", in.Writer)
}
