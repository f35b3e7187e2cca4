package idempotency_test

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
)

// Two stores in one process, named apart, with one hook that counts their operations by instance,
// name and outcome in an expvar map ("orders IDEMPOTENCY TRY BEGIN succeeded": n, served at
// /debug/vars): the stores never share a counter.
func ExampleWithInstance() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	ops := expvar.NewMap("idempotency_operations")
	count := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		return ctx, func(o luakit.HookOutcome, _ error) { ops.Add(op.Instance+" "+op.Name+" "+o.String(), 1) }, nil
	})
	orders, err := idempotency.New(client, idempotency.WithHooks(count), idempotency.WithInstance("orders"),
		idempotency.WithKeyPrefix("orders:"))
	if err != nil {
		return
	}
	refunds, err := idempotency.New(client, idempotency.WithHooks(count), idempotency.WithInstance("refunds"),
		idempotency.WithKeyPrefix("refunds:"))
	if err != nil {
		return
	}
	_, _ = orders, refunds
}

// Refuse new claims while the service drains: the hook rejects IDEMPOTENCY TRY BEGIN and IDEMPOTENCY
// BEGIN before anything is sent, while requests already claimed can still complete or abandon.
func ExampleWithHooks() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	var draining atomic.Bool
	errDraining := errors.New("draining: retry on another instance")
	drain := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		if draining.Load() && (op.Name == "IDEMPOTENCY TRY BEGIN" || op.Name == "IDEMPOTENCY BEGIN") {
			return nil, nil, errDraining
		}
		return nil, nil, nil
	})
	st, err := idempotency.New(client, idempotency.WithHooks(drain), idempotency.WithInstance("orders"))
	if err != nil {
		return
	}
	draining.Store(true)
	_, err = st.TryBegin(context.Background(), "req-1", time.Minute, idempotency.NoFingerprint)
	fmt.Println(errors.Is(err, errDraining))
}
