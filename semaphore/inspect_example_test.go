package semaphore_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/semaphore"
)

// Read a semaphore's stored capacity and live permits without knowing its capacity.
func ExampleInspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	in, err := semaphore.Inspect(context.Background(), client, "batch:42:permits")
	if err != nil {
		return
	}
	fmt.Println("capacity", in.Capacity, "active", len(in.Permits), "free", in.Free)
}
