package hooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/luakit"
)

// testCounterHooks checks that each Store call is admitted once with the Store's instance name, and
// that a rejected increment writes nothing.
func testCounterHooks(t *testing.T, e *env) {
	var instances []string
	j := &journal{}
	spy := luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		instances = append(instances, op.Instance)
		return ctx, nil, nil
	})
	s, err := counter.New(e.client(t), counter.WithHooks(spy, j), counter.WithInstance("quota"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	ctx := context.Background()
	if _, err := s.IncrementWithExpire(ctx, "hits", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	j.setReject("COUNTER INCREMENT WITH EXPIRE")
	if _, err := s.IncrementWithExpire(ctx, "hits", 5, time.Minute); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("IncrementWithExpire = %v", err)
	}
	j.setReject()
	if v, err := s.Get(ctx, "hits"); err != nil || v != 2 {
		t.Fatalf("Get = %v %v, want 2: the rejected increment must write nothing", v, err)
	}
	expect(t, j, "admit COUNTER INCREMENT WITH EXPIRE", "done COUNTER INCREMENT WITH EXPIRE succeeded",
		"admit COUNTER INCREMENT WITH EXPIRE", "admit COUNTER GET", "done COUNTER GET succeeded")
	for _, in := range instances {
		if in != "quota" {
			t.Fatalf("instances %q, want quota", instances)
		}
	}
}
