package leader_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/leader"
)

// From an operator's process, which does not campaign: is there a leader, and with which token?
func ExampleElection_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	el, err := leader.New(client, "scheduler")
	if err != nil {
		return
	}
	in, err := el.Inspect(context.Background())
	if err != nil {
		return
	}
	fmt.Println("leader exists", in.Exists, "token", in.FencingToken, "remaining", in.Remaining)
}
