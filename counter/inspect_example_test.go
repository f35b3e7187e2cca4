package counter_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/counter"
)

// Read a counter and its remaining life in one read-only round trip.
func ExampleStore_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	s, err := counter.New(client)
	if err != nil {
		return
	}
	defer s.Close(context.Background())
	in, err := s.Inspect(context.Background(), "jobs:done")
	if err != nil {
		return
	}
	fmt.Println("exists", in.Exists, "value", in.Value, "remaining", in.Remaining, "no expiry", in.NoExpiry)
}
