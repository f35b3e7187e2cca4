package semaphore_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/semaphore"
)

// Read a semaphore's stored capacity and live permits: an operator's Semaphore may use any capacity.
func ExampleSemaphore_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	sem, err := semaphore.New(client, "batch:42:permits", 1)
	if err != nil {
		return
	}
	in, err := sem.Inspect(context.Background())
	if err != nil {
		return
	}
	fmt.Println("capacity", in.Capacity, "active", len(in.Permits), "free", in.Free)
}
