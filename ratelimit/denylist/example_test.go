package denylist_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// One deny list per process, bound to a limiter per customer: a denied customer is rejected before
// any capacity is touched, with Reason "deny_list" and no RetryAfter. (It needs a server at
// 127.0.0.1:6379, so it is compiled but not run by go test.)
func ExampleList() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()

	denyList, err := denylist.New(client, "limits:denied",
		denylist.WithCacheDuration(time.Second), denylist.WithCacheCapacity(1024))
	if err != nil {
		return
	}
	defer denyList.Close(ctx)
	if err := denyList.SetDenied(ctx, "customer:42", true); err != nil {
		return // on ErrUncertain the write may have happened: IsDenied reads again
	}

	limiter, err := ratelimit.New(client, "limits:customer:42",
		ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.WithDenyList(denyList, "customer:42"))
	if err != nil {
		return
	}
	defer limiter.Close(ctx)
	res, err := limiter.Allow(ctx)
	if err != nil {
		return // the deny list or the limit could not be read: fail open or closed, your choice
	}
	fmt.Println(res.Allowed, res.Reason, res.RetryAfter) // false deny_list 0s

	_ = denyList.SetDenied(ctx, "customer:42", false)
}

// Cache effectiveness: hits are answered without I/O, misses share reads.
func ExampleList_Stats() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	denyList, err := denylist.New(client, "limits:denied")
	if err != nil {
		return
	}
	defer denyList.Close(context.Background())
	for range 3 {
		_, _ = denyList.IsDenied(context.Background(), "customer:42")
	}
	s := denyList.Stats()
	fmt.Println(s.Hits, s.Misses, s.ServerReads) // 2 1 1 within the cache duration
}

// Per-tenant limits with one shared deny list: each key of the Keyed limiter is checked as its own
// identity (or as what the function returns), before any capacity is touched.
func Example_keyed() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	denyList, err := denylist.New(client, "limits:denied")
	if err != nil {
		return
	}
	defer denyList.Close(ctx)
	perTenant, err := ratelimit.NewKeyed(client,
		ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.WithKeyPrefix("limits:tenant:"),
		ratelimit.WithKeyedDenyList(denyList, func(key string) string { return "tenant:" + key }))
	if err != nil {
		return
	}
	defer perTenant.Close(ctx)

	if err := denyList.SetDenied(ctx, "tenant:globex", true); err != nil {
		return
	}
	for _, tenant := range []string{"acme", "globex"} {
		res, err := perTenant.Allow(ctx, tenant)
		if err != nil {
			continue
		}
		fmt.Println(tenant, res.Allowed, res.Reason) // acme true; globex false deny_list
	}
}

// Listing the deny list for an operator.
func ExampleList_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	dl, err := denylist.New(client, "limits:denied")
	if err != nil {
		return
	}
	defer dl.Close(context.Background())

	ins, err := dl.Inspect(context.Background())
	if err != nil || !ins.Exists {
		return
	}
	for _, id := range ins.Identities {
		fmt.Printf("%q\n", id)
	}
}
