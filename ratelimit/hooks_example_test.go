package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// Freeze policy changes during an incident: a hook rejects RATE LIMIT UPDATE before anything is sent,
// while acquisitions go on. WithInstance tells this limiter's operations (and metric series) from the
// process's other limiters.
func ExampleWithHooks() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	var frozen atomic.Bool
	errFrozen := errors.New("policy changes are frozen")
	freeze := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		if op.Name == "RATE LIMIT UPDATE" && frozen.Load() {
			return nil, nil, errFrozen
		}
		return nil, nil, nil
	})
	limiter, err := ratelimit.New(client, "limits:api", ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.WithHooks(freeze), ratelimit.WithInstance("api"))
	if err != nil {
		return
	}
	defer limiter.Close(context.Background())

	frozen.Store(true)
	err = limiter.Update(context.Background(), ratelimit.FixedWindow{Limit: 200, Window: time.Minute}, ratelimit.Migrate)
	fmt.Println(errors.Is(err, errFrozen)) // the hook's error, unchanged; the policy is as before
}

// Two limiters in one process export separate series: MetricAllowed and MetricBlocked carry
// coordkit.instance="search" or "upload" (AttrInstance), so their counts never merge.
func ExampleWithInstance() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	search, err := ratelimit.New(client, "limits:search", ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.WithInstance("search"))
	if err != nil {
		return
	}
	defer search.Close(context.Background())
	upload, err := ratelimit.New(client, "limits:upload", ratelimit.FixedWindow{Limit: 10, Window: time.Minute},
		ratelimit.WithInstance("upload"))
	if err != nil {
		return
	}
	defer upload.Close(context.Background())
	res, err := upload.Allow(context.Background())
	if err != nil {
		return
	}
	fmt.Println("upload allowed:", res.Allowed) // counted under coordkit.instance="upload"
}
