package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// Log every lock operation's outcome and duration. WithInstance keeps this Locker's records apart from
// other Lockers in the process; the hook never sees keys or tokens.
func ExampleWithHooks() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	timing := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		start := time.Now()
		return ctx, func(o luakit.HookOutcome, err error) {
			slog.Info("coordkit", "op", op.Name, "instance", op.Instance, "outcome", o.String(),
				"duration", time.Since(start), "error", err)
		}, nil
	})
	lk, err := lock.New(client, lock.WithHooks(timing), lock.WithInstance("billing"))
	if err != nil {
		return
	}
	// One LOCK ACQUIRE record however long it waits, then LOCK RELEASE.
	lease, err := lk.Acquire(context.Background(), "invoice:42", 30*time.Second)
	if err != nil {
		return
	}
	_, _ = lease.Release(context.Background())
}

// retries counts the attempts a waiting Acquire retries after a transient failure (LOADING, a refused
// connection...), which its one hook completion does not show: a hook that is also a
// luakit.AttemptObserver sees every attempt.
type retries struct{ n atomic.Int64 }

func (r *retries) Admit(context.Context, luakit.Operation) (context.Context, luakit.Completion, error) {
	return nil, nil, nil
}

func (r *retries) ObserveAttempt(_ context.Context, err error) {
	if luakit.IsTransient(err) {
		r.n.Add(1)
	}
}

// Count the attempts a waiting Acquire retried.
func ExampleWithHooks_attempts() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	retried := &retries{}
	lk, err := lock.New(client, lock.WithHooks(retried))
	if err != nil {
		return
	}
	lease, err := lk.Acquire(context.Background(), "invoice:42", 30*time.Second)
	if err != nil {
		return
	}
	defer lease.Release(context.Background())
	slog.Info("acquired", "transient_failures", retried.n.Load())
}

// Two Lockers in one process, named apart: one policy hook tells them apart by Operation.Instance and
// lets only the operator's Locker force releases.
func ExampleWithInstance() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	errOperatorsOnly := errors.New("force release is an operator task")
	policy := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		if op.Name == "LOCK FORCE RELEASE" && op.Instance != "operator" {
			return nil, nil, errOperatorsOnly
		}
		return nil, nil, nil
	})
	app, err := lock.New(client, lock.WithHooks(policy), lock.WithInstance("app"))
	if err != nil {
		return
	}
	operator, err := lock.New(client, lock.WithHooks(policy), lock.WithInstance("operator"))
	if err != nil {
		return
	}
	ctx := context.Background()
	_, err = app.ForceRelease(ctx, "invoice:42")
	fmt.Println("app:", errors.Is(err, errOperatorsOnly)) // refused before anything is sent
	_, err = operator.ForceRelease(ctx, "invoice:42")
	fmt.Println("operator:", err == nil)
}
