package luakit_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
)

// A policy hook that refuses force releases and a hook that reports each outcome, composed in order.
// A primitive calls Hooks.Begin before any I/O and Scope.End once with the caller's result; here the
// calls are made by hand to show what the hooks see.
func ExampleHookFunc() {
	policy := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		if op.Name == "LOCK FORCE RELEASE" {
			return nil, nil, errors.New("force release needs an operator")
		}
		return nil, nil, nil // admitted; nothing to report
	})
	report := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		return ctx, func(o luakit.HookOutcome, err error) {
			fmt.Printf("%s %s (%s): %s\n", op.Primitive, op.Name, op.Instance, o)
		}, nil
	})
	hooks := luakit.Hooks{policy, report}
	ctx := context.Background()

	op := luakit.Operation{Primitive: "lock", Name: "LOCK ACQUIRE", Instance: "billing"}
	_, sc, err := hooks.Begin(ctx, op)
	fmt.Println("admitted:", err == nil)
	sc.End(nil) // the operation succeeded

	op.Name = "LOCK FORCE RELEASE"
	_, _, err = hooks.Begin(ctx, op)
	fmt.Println("rejected:", err)
	// Output:
	// admitted: true
	// lock LOCK ACQUIRE (billing): succeeded
	// rejected: force release needs an operator
}
