package hooks_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// testRateLimitHookRules checks the hook contract on a real Limiter, Keyed and denylist.List.
func testRateLimitHookRules(t *testing.T, e *env) {
	client := e.client(t)
	ctx := context.Background()
	j := &journal{}
	dl, err := denylist.New(client, "deny", denylist.WithHooks(j), denylist.WithCacheDuration(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dl.Close(ctx) }()

	t.Run("rejected_acquire_sends_nothing", func(t *testing.T) {
		l, err := ratelimit.New(client, "rl-reject", ratelimit.FixedWindow{Limit: 5, Window: time.Minute},
			ratelimit.WithHooks(j), ratelimit.WithInstance("api"), ratelimit.WithDenyList(dl, "who"),
			ratelimit.WithQueue(5, ratelimit.OldestFirst))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close(ctx) }()
		j.setReject("RATE LIMIT ACQUIRE")
		defer j.setReject()
		before := e.CommandStats(t)
		for _, call := range []func() (ratelimit.Result, error){
			func() (ratelimit.Result, error) { return l.AllowN(ctx, 1) },
			func() (ratelimit.Result, error) { return l.WaitN(ctx, 1) },
		} {
			if _, err := call(); err != errRejected { //nolint:errorlint // the rejection is returned unchanged
				t.Fatalf("err = %v, want the rejection unchanged", err)
			}
		}
		if d := e.CommandsSince(t, before); len(d) != 0 {
			t.Fatalf("a rejected acquisition sent commands: %v", d)
		}
		if exists(t, e.Raw, "rl-reject") || l.Stats() != (ratelimit.Stats{Available: -1}) {
			t.Fatalf("a rejected acquisition changed state: %+v", l.Stats())
		}
		if st := dl.Stats(); st.Misses+st.Hits != 0 {
			t.Fatalf("a rejected acquisition read the deny list: %+v", st)
		}
		expect(t, j, "admit RATE LIMIT ACQUIRE", "admit RATE LIMIT ACQUIRE")
	})

	t.Run("one_completion_per_queued_acquire", func(t *testing.T) {
		l, err := ratelimit.New(client, "rl-queue", ratelimit.FixedWindow{Limit: 1, Window: 100 * time.Millisecond},
			ratelimit.WithHooks(j), ratelimit.WithQueue(10, ratelimit.OldestFirst), ratelimit.WithDenyList(dl, "who"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close(ctx) }()
		const waiters = 3
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for range waiters {
			wg.Go(func() {
				_, err := l.WaitN(ctx, 1)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if st := l.Stats(); st.Granted != waiters {
			t.Fatalf("Stats %+v, want %d granted", st, waiters)
		}
		if st := dl.Stats(); st.ServerReads < waiters {
			t.Fatalf("deny-list stats %+v: the waits did not check it", st)
		}
		got := j.take()
		slices.Sort(got)
		want := []string{}
		for range waiters {
			want = append(want, "admit RATE LIMIT ACQUIRE")
		}
		for range waiters {
			want = append(want, "done RATE LIMIT ACQUIRE succeeded")
		}
		if !slices.Equal(got, want) {
			t.Fatalf("journal %q\nwant %q (retries and the limiter's own deny-list checks create no scope)", got, want)
		}
	})

	t.Run("canceled_and_rejected_waits", func(t *testing.T) {
		l, err := ratelimit.New(client, "rl-cancel", ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
			ratelimit.WithHooks(j), ratelimit.WithQueue(1, ratelimit.OldestFirst))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close(ctx) }()
		if res, err := l.AllowN(ctx, 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN = %+v %v", res, err)
		}
		if res, err := l.AllowN(ctx, 1); err != nil || res.Allowed {
			t.Fatalf("AllowN on an empty window = %+v %v", res, err)
		}
		if _, err := l.WaitN(ctx, 2); !errors.Is(err, ratelimit.ErrExceedsCapacity) {
			t.Fatalf("WaitN above the capacity = %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := l.WaitN(cctx, 1); done <- err }()
		// Once the first wait holds the queue's only place, a second one finds it full.
		for l.Stats().Queued == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := l.WaitN(ctx, 1); !errors.Is(err, ratelimit.ErrQueueFull) {
			t.Fatalf("WaitN on a full queue = %v", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled WaitN = %v", err)
		}
		got := j.take()
		// Every call completed once; the canceled one as canceled, every decision as succeeded.
		admits, canceled, succeeded, other := 0, 0, 0, 0
		for _, e := range got {
			switch e {
			case "admit RATE LIMIT ACQUIRE":
				admits++
			case "done RATE LIMIT ACQUIRE canceled":
				canceled++
			case "done RATE LIMIT ACQUIRE succeeded":
				succeeded++
			default:
				other++
			}
		}
		if other != 0 || canceled != 1 || succeeded != 4 || admits != 5 {
			t.Fatalf("journal %q", got)
		}
	})

	// A wait whose next admission would come after the caller's deadline returns at once with an error
	// wrapping context.DeadlineExceeded, before the deadline: the caller's deadline ended it, as if it
	// had slept until then, so it is canceled (not a failure, and not an uncertain one).
	t.Run("wait_past_the_deadline_is_canceled", func(t *testing.T) {
		l, err := ratelimit.New(client, "rl-deadline", ratelimit.FixedWindow{Limit: 1, Window: time.Hour},
			ratelimit.WithHooks(j))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close(ctx) }()
		k, err := ratelimit.NewKeyed(client, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, ratelimit.WithHooks(j))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k.Close(ctx) }()
		if res, err := l.AllowN(ctx, 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN = %+v %v", res, err)
		}
		if res, err := k.AllowN(ctx, "deadline-user", 1); err != nil || !res.Allowed {
			t.Fatalf("Keyed AllowN = %+v %v", res, err)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if _, err := l.WaitN(dctx, 1); !errors.Is(err, context.DeadlineExceeded) || dctx.Err() != nil {
			t.Fatalf("WaitN = %v (ctx %v), want a deadline error before the deadline", err, dctx.Err())
		}
		if _, err := k.WaitN(dctx, "deadline-user", 1); !errors.Is(err, context.DeadlineExceeded) || dctx.Err() != nil {
			t.Fatalf("Keyed WaitN = %v (ctx %v), want a deadline error before the deadline", err, dctx.Err())
		}
		expect(t, j, "admit RATE LIMIT ACQUIRE", "done RATE LIMIT ACQUIRE succeeded",
			"admit RATE LIMIT ACQUIRE", "done RATE LIMIT ACQUIRE succeeded",
			"admit RATE LIMIT ACQUIRE", "done RATE LIMIT ACQUIRE canceled",
			"admit RATE LIMIT ACQUIRE", "done RATE LIMIT ACQUIRE canceled")
	})

	t.Run("keyed_and_deny_list_operations", func(t *testing.T) {
		k, err := ratelimit.NewKeyed(client, ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 5, Period: time.Minute},
			ratelimit.WithHooks(j), ratelimit.WithInstance("per-user"), ratelimit.WithKeyedDenyList(dl, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k.Close(ctx) }()
		if err := dl.SetDenied(ctx, "mallory", true); err != nil {
			t.Fatal(err)
		}
		if res, err := k.AllowN(ctx, "mallory", 1); err != nil || res.Reason != ratelimit.ReasonDenyList {
			t.Fatalf("AllowN for a denied key = %+v %v", res, err)
		}
		if _, err := k.Inspect(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if err := k.Refund(ctx, "alice", 1); err != nil {
			t.Fatal(err)
		}
		if err := k.Reset(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if err := k.SetPolicy(ctx, ratelimit.TokenBucket{Limit: 6, TokensPerPeriod: 6, Period: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := dl.Inspect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := dl.IsDenied(ctx, "mallory"); err != nil {
			t.Fatal(err)
		}
		expect(t, j,
			"admit RATE LIMIT DENY LIST WRITE", "done RATE LIMIT DENY LIST WRITE succeeded",
			"admit RATE LIMIT ACQUIRE", "done RATE LIMIT ACQUIRE succeeded",
			"admit RATE LIMIT INSPECT", "done RATE LIMIT INSPECT succeeded",
			"admit RATE LIMIT REFUND", "done RATE LIMIT REFUND succeeded",
			"admit RATE LIMIT RESET", "done RATE LIMIT RESET succeeded",
			"admit RATE LIMIT UPDATE", "done RATE LIMIT UPDATE succeeded",
			"admit RATE LIMIT DENY LIST INSPECT", "done RATE LIMIT DENY LIST INSPECT succeeded",
			"admit RATE LIMIT DENY LIST READ", "done RATE LIMIT DENY LIST READ succeeded")
	})

	t.Run("calls_from_a_hook_get_their_own_scope", func(t *testing.T) {
		l, err := ratelimit.New(client, "rl-inside", ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, ratelimit.WithHooks(j))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close(ctx) }()
		j.mu.Lock()
		j.inside = func(ctx context.Context, op luakit.Operation) {
			if op.Name == "RATE LIMIT ACQUIRE" {
				if _, err := dl.IsDenied(ctx, "who"); err != nil {
					t.Error(err)
				}
			}
		}
		j.mu.Unlock()
		defer func() { j.mu.Lock(); j.inside = nil; j.mu.Unlock() }()
		if _, err := l.AllowN(ctx, 1); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit RATE LIMIT ACQUIRE", "admit RATE LIMIT DENY LIST READ",
			"done RATE LIMIT DENY LIST READ succeeded", "done RATE LIMIT ACQUIRE succeeded")
	})
}
