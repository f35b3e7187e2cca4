package latch_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/latch"
)

// Read a latch's state, then delete it only if it is still the generation that was read.
func ExampleLatches_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, _ := latch.New(client)
	ctx := context.Background()
	in, err := ls.Inspect(ctx, "deploy:7")
	if err != nil {
		return
	}
	fmt.Println(in.Status, in.Count, "of", in.Initial, "remaining", in.Remaining)
	if in.Status == latch.StatusAborted {
		deleted, err := ls.ForceDelete(ctx, "deploy:7", in.Generation)
		fmt.Println("deleted", deleted, err)
	}
}

// ForceDelete removes a latch of any state, only when it still holds the given generation.
func ExampleLatches_ForceDelete() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ls, _ := latch.New(client)
	in, err := ls.Inspect(context.Background(), "deploy:7")
	if err != nil || !in.Exists {
		return
	}
	deleted, err := ls.ForceDelete(context.Background(), "deploy:7", in.Generation)
	fmt.Println("deleted", deleted, err)
}
