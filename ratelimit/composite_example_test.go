package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
)

// A short burst allowance and a longer rolling quota on one key, decided atomically: a request is
// admitted only if every component admits it, and RetryAfter is the longest wait among them. (It
// needs a server at 127.0.0.1:6379, so it is compiled but not run by go test.)
func ExampleComposite() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.New(client, "limits:checkout", ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second},
		ratelimit.SlidingWindow{Limit: 100, Window: time.Minute, Segments: 10},
		ratelimit.FixedWindow{Limit: 1000, Window: time.Hour},
	}}, ratelimit.WithKeyPrefix("tenant:42:"))
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	res, err := limiter.Allow(context.Background())
	switch {
	case err != nil:
		fmt.Println("no decision:", err) // ErrConfigMismatch: another process uses other components
	case res.Allowed:
		fmt.Println("admitted; the tightest component is", res.Component, "with", res.Remaining, "left")
	case res.RetryAfter > 0:
		fmt.Println("every component can admit this request in", res.RetryAfter)
	}
}
