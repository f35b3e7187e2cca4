package ratelimithttp_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// Limit each API key to bursts of 20 requests, refilled at 10 per second. It needs a server, so it
// is compiled but not run.
func ExampleMiddleware_Handler() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	limiter, err := ratelimit.NewKeyed(client,
		ratelimit.GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond},
		ratelimit.WithKeyPrefix("rl:api:"))
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())
	mw, err := ratelimithttp.New(limiter,
		ratelimithttp.WithPolicyNames("api"),
		// Authentication runs outside the middleware and has checked the key.
		ratelimithttp.WithKey(func(r *http.Request) (string, error) {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), nil
		}),
		// Exports cost 5 permits, everything else 1.
		ratelimithttp.WithCost(func(r *http.Request) int64 {
			if strings.HasPrefix(r.URL.Path, "/api/export") {
				return 5
			}
			return 1
		}),
	)
	if err != nil {
		return
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	http.Handle("/api/", mw.Handler(api))
}

// A composite per client IP: 10 per second and 1000 per hour. The fields name whichever component
// has the fewest permits left. Deny-listed callers get 403 instead of 429.
func ExampleWithPolicyNames() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	deny, err := denylist.New(client, "rl:denied")
	if err != nil {
		return
	}
	defer deny.Close(context.Background())
	limiter, err := ratelimit.NewKeyed(client, ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 10, Window: time.Second},
		ratelimit.SlidingWindow{Limit: 1000, Window: time.Hour, Segments: 60},
	}}, ratelimit.WithKeyPrefix("rl:ip:"), ratelimit.WithKeyedDenyList(deny, nil))
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())
	mw, err := ratelimithttp.New(limiter,
		ratelimithttp.WithPolicyNames("per-second", "per-hour"),
		ratelimithttp.WithRejected(func(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
			if res.Reason == ratelimit.ReasonDenyList {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			ratelimithttp.WriteTooManyRequests(w, r, res)
		}))
	if err != nil {
		return
	}
	http.Handle("/", mw.Handler(http.NotFoundHandler()))
}

func ExamplePolicyField() {
	policy, _ := ratelimithttp.PolicyField("api", 100, time.Minute)
	limit, _ := ratelimithttp.LimitField("api", 0, 29500*time.Millisecond)
	fmt.Println(policy)
	fmt.Println(limit)
	// Output:
	// "api";q=100;w=60
	// "api";r=0;t=30
}
