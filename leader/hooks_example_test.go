package leader_test

import (
	"context"
	"log/slog"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/luakit"
)

// Log each renewal that failed, with the election's name: the election's hooks see LEADER CAMPAIGN,
// LEADER RENEW and LEADER RESIGN, never the operations of the lock it campaigns with.
func ExampleWithHooks() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	renewals := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		if op.Name != "LEADER RENEW" {
			return nil, nil, nil
		}
		return ctx, func(o luakit.HookOutcome, err error) {
			if o == luakit.OutcomeFailed {
				slog.Warn("renewal failed", "election", op.Instance, "error", err)
			}
		}, nil
	})
	e, err := leader.New(client, "scheduler", leader.WithHooks(renewals), leader.WithInstance("scheduler"))
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = e.Run(ctx) // blocks: campaigns, leads, renews
}

// Two elections in one process, named apart: each exports its own MetricIsLeader series (attribute
// AttrInstance), 1 on the leader and 0 on followers, and its own change and failure counts.
func ExampleWithInstance() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	scheduler, err := leader.New(client, "scheduler", leader.WithInstance("scheduler"))
	if err != nil {
		return
	}
	compactor, err := leader.New(client, "compactor", leader.WithInstance("compactor"))
	if err != nil {
		return
	}
	ctx := context.Background()
	if err := scheduler.Start(ctx); err != nil {
		return
	}
	defer scheduler.Stop(ctx)
	if err := compactor.Start(ctx); err != nil {
		return
	}
	defer compactor.Stop(ctx)
}
