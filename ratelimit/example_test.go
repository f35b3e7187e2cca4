package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
)

// One decision per request: admit or tell the caller when to retry.
func ExampleLimiter_Allow() {
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

	res, err := limiter.Allow(context.Background())
	switch {
	case err != nil:
		fmt.Println("no decision:", err) // fail open or closed: the caller's choice
	case res.Allowed:
		fmt.Println("admitted,", res.Remaining, "left")
	case res.RetryAfter > 0:
		fmt.Println("retry after", res.RetryAfter)
	default:
		fmt.Println("rejected:", res.Reason)
	}
}

// A worker that waits for capacity: up to 50 permits wait in the local queue, oldest first, each
// sleeping until the server-computed time before its single retry.
func ExampleLimiter_WaitN() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.New(client, "limits:export",
		ratelimit.TokenBucket{Limit: 100, TokensPerPeriod: 10, Period: time.Second},
		ratelimit.WithQueue(50, ratelimit.OldestFirst))
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := limiter.WaitN(ctx, 5)
	if err != nil {
		fmt.Println("gave up:", err)
		return
	}
	fmt.Println("admitted:", res.Allowed, "stats:", limiter.Stats())
}

// Raising a limit at runtime without losing the usage already counted. With several processes on the
// key, exactly one migrates and the others adopt (see the package documentation).
func ExampleLimiter_Update() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.New(client, "limits:api",
		ratelimit.FixedWindow{Limit: 100, Window: time.Minute})
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	migrating := true // elected by the application's rollout barrier
	mode := ratelimit.Adopt
	if migrating {
		mode = ratelimit.Migrate
	}
	err = limiter.Update(context.Background(), ratelimit.FixedWindow{Limit: 200, Window: 2 * time.Minute}, mode)
	fmt.Println("updated:", err == nil, limiter.Policy())
}

// Per-tenant limits from one policy: no Go object per tenant, each tenant is its own key.
func ExampleKeyed() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	perTenant, err := ratelimit.NewKeyed(client,
		ratelimit.SlidingWindow{Limit: 1000, Window: time.Hour, Segments: 12},
		ratelimit.WithKeyPrefix("limits:tenant:"))
	if err != nil {
		return
	}
	defer perTenant.Close(context.Background())

	for _, tenant := range []string{"acme", "globex"} {
		res, err := perTenant.Allow(context.Background(), tenant)
		if err != nil {
			continue
		}
		fmt.Println(tenant, "admitted:", res.Allowed, "remaining:", res.Remaining)
	}
}

// Tightening a per-tenant limit in a running process: no key is visited; each tenant's key keeps its
// usage and is converted by its next decision. In a rolling deploy, start the new processes with a
// higher WithPolicyVersion instead (see the package documentation).
func ExampleKeyed_SetPolicy() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	perTenant, err := ratelimit.NewKeyed(client,
		ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		}},
		ratelimit.WithKeyPrefix("limits:tenant:"), ratelimit.WithPolicyVersion(3))
	if err != nil {
		return
	}
	defer perTenant.Close(context.Background())

	err = perTenant.SetPolicy(context.Background(), ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: 100 * time.Millisecond},
		ratelimit.FixedWindow{Limit: 60, Window: time.Minute},
	}})
	fmt.Println("updated:", err == nil)
}
