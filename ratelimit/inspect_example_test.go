package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
)

// Reading a key's state for an operator without consuming anything: one read-only script.
func ExampleLimiter_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.New(client, "limits:checkout",
		ratelimit.GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond})
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	in, err := limiter.Inspect(context.Background())
	if err != nil {
		fmt.Println("no answer:", err)
		return
	}
	fmt.Printf("%d of %d left, full at %v, next permit in %v\n",
		in.Remaining, in.Limit, in.ResetAt(), in.RetryAfter)
}

// Inspecting one tenant of a Keyed limiter creates no local state for it.
func ExampleKeyed_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	perTenant, err := ratelimit.NewKeyed(client,
		ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, ratelimit.WithKeyPrefix("limits:tenant:"))
	if err != nil {
		return
	}
	defer perTenant.Close(context.Background())

	in, err := perTenant.Inspect(context.Background(), "acme")
	if err == nil {
		fmt.Println("acme:", in.Remaining, "left, reset in", in.Reset)
	}
}

// Giving a permit back when the work it admitted failed downstream, and clearing a key.
func ExampleLimiter_Refund() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.New(client, "limits:upstream",
		ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Second})
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	res, err := limiter.Allow(context.Background())
	if err != nil || !res.Allowed {
		return
	}
	if callUpstream() != nil {
		// The call never reached the upstream: give the permit back (one script).
		_ = limiter.Refund(context.Background(), 1)
	}
	// An operator clears the key: full capacity again for every process.
	_ = limiter.Reset(context.Background())
}

func callUpstream() error { return nil }
