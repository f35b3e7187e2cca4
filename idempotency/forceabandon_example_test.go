package idempotency_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/idempotency"
)

// Remove a stuck pending claim: inspect it, then abandon exactly the generation that was read.
func ExampleStore_ForceAbandon() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	s, _ := idempotency.New(client)
	ctx := context.Background()
	in, err := s.Inspect(ctx, "payment:42")
	if err != nil || !in.Exists || in.State != idempotency.InProgress {
		return
	}
	removed, err := s.ForceAbandon(ctx, "payment:42", in.Generation)
	fmt.Println("removed", removed, err)
}
