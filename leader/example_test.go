package leader_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/luakit"
)

// A scheduler replica campaigns for leadership and, while it leads, writes with its fencing token.
// Compile-only: it needs a server.
func Example() {
	// A client from NewTrackedClient lets a waiting candidate wake as soon as the leader releases.
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, luakit.NewTracker())
	if err != nil {
		return
	}
	defer client.Close()

	// The protected resource rejects a token lower than the highest it accepted (in a database: UPDATE
	// ... WHERE last_token <= $token, in the write's own transaction). OnElected calls run one at a time.
	var lastToken int64
	write := func(token int64) bool {
		if token < lastToken {
			return false
		}
		lastToken = token
		return true
	}
	// Every replica campaigns under one name; its keys are {scheduler}:lease and {scheduler}:fence.
	el, err := leader.New(client, "scheduler",
		leader.WithLeaseDuration(15*time.Second),
		leader.WithRetryDelay(time.Second),
		leader.OnElected(func(ctx context.Context, term leader.Term) error {
			for ctx.Err() == nil {
				if !write(term.FencingToken) {
					return nil // a newer leader wrote: step down
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			return nil
		}),
		leader.OnRevoked(func(term leader.Term) {
			fmt.Println("revoked:", context.Cause(term.Context()))
		}))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := el.Run(ctx); err != nil && luakit.IsTerminal(err) {
		fmt.Println("election failed:", err)
	}
}

// Start and Stop run the election in the background, for services with explicit lifecycles.
func ExampleElection_Start() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	el, err := leader.New(client, "jobs", leader.OnChange(func(c leader.Change) {
		fmt.Println(c.State, c.Term.FencingToken)
	}))
	if err != nil {
		return
	}
	_ = el.Start(context.Background())
	// ... serve ...
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = el.Stop(stopCtx) // revokes a held term, releases the lease, waits for the callbacks
}

// An election that already runs on its own keys keeps them; WithStrictSlots makes a standalone client
// reject, in New, a pair a Cluster would reject.
func ExampleWithKeys() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	el, err := leader.New(client, "scheduler",
		leader.WithKeys("{scheduler}:leader", "{scheduler}:fence"), leader.WithStrictSlots(true))
	if err != nil {
		return // errors.Is(err, leader.ErrInvalidConfig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = el.Run(ctx)
}

// The zero Term is not current: its context is already cancelled.
func ExampleTerm() {
	var term leader.Term
	fmt.Println(term.FencingToken, term.Context().Err() != nil)
	// Output: 0 true
}
