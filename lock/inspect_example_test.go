package lock_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
)

// An operator's view of a lock: held or not, for how long, and the last fencing token issued.
func ExampleLocker_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	lk, _ := lock.New(client)
	in, err := lk.Inspect(context.Background(), "invoice:42")
	if err != nil {
		return
	}
	fmt.Println("exists", in.Exists, "remaining", in.Remaining, "fencing token", in.FencingToken)
}

// Free a lock whose holder is stuck. The fence counter is kept, so the stuck holder's later writes
// carry a lower token than the next holder's and the resource rejects them.
func ExampleLocker_ForceRelease() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	lk, _ := lock.New(client)
	deleted, err := lk.ForceRelease(context.Background(), "invoice:42")
	if err != nil {
		return
	}
	fmt.Println("deleted", deleted)
}

// A lock of an existing layout (the keys of TryAcquireKeys) is inspected and freed by its two keys.
func ExampleLocker_InspectKeys() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	lk, _ := lock.New(client)
	ctx := context.Background()
	in, err := lk.InspectKeys(ctx, "{job:7}:owner", "{job:7}:token")
	if err != nil {
		return
	}
	if in.Exists {
		deleted, err := lk.ForceReleaseKeys(ctx, "{job:7}:owner", "{job:7}:token")
		fmt.Println("deleted", deleted, err)
	}
}
