package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// journal is a hook that records admissions and completions and rejects the operations named in
// reject (with errRejected).
type journal struct {
	mu     sync.Mutex
	tag    string
	reject map[string]bool
	log    []string
	inside func(ctx context.Context, op luakit.Operation) // runs inside Admit, when set
}

var errRejected = errors.New("rejected by policy")

func (j *journal) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	j.mu.Lock()
	rej := j.reject[op.Name]
	j.log = append(j.log, j.tag+"admit "+op.Name)
	inside := j.inside
	j.mu.Unlock()
	if rej {
		return nil, nil, errRejected
	}
	if inside != nil {
		inside(ctx, op)
	}
	return ctx, func(o luakit.HookOutcome, err error) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.log = append(j.log, fmt.Sprintf("%sdone %s %s", j.tag, op.Name, o))
	}, nil
}

func (j *journal) setReject(names ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reject = map[string]bool{}
	for _, n := range names {
		j.reject[n] = true
	}
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.log
	j.log = nil
	return out
}

func expect(t *testing.T, j *journal, want ...string) {
	t.Helper()
	if got := j.take(); !slices.Equal(got, want) {
		t.Fatalf("hook journal\n got %q\nwant %q", got, want)
	}
}

// testLockHookRules checks the hook contract on a real Locker, one rule per subtest.
func testLockHookRules(t *testing.T, e *env) {
	client := e.client(t)
	ctx := context.Background()
	j := &journal{}
	locker, err := lock.New(client, lock.WithHooks(j), lock.WithInstance("rules"), lock.WithRetryDelay(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("rejected_acquire_sends_nothing", func(t *testing.T) {
		j.setReject("LOCK TRY ACQUIRE")
		defer j.setReject()
		_, err := locker.TryAcquire(ctx, "r1", time.Minute)
		if err != errRejected { //nolint:errorlint // the rejection is returned unchanged
			t.Fatalf("TryAcquire = %v, want the rejection unchanged", err)
		}
		lk, _ := lock.Keys("r1")
		if exists(t, e.Raw, lk) {
			t.Fatal("a rejected acquisition wrote the lease")
		}
		expect(t, j, "admit LOCK TRY ACQUIRE")
	})

	t.Run("rejected_release_keeps_lease", func(t *testing.T) {
		l, err := locker.TryAcquire(ctx, "r2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j.setReject("LOCK RELEASE", "LOCK EXTEND")
		if ok, err := l.Extend(ctx); ok || err != errRejected { //nolint:errorlint // unchanged
			t.Fatalf("Extend = %v %v", ok, err)
		}
		if _, err := l.Release(ctx); err != errRejected { //nolint:errorlint // unchanged
			t.Fatalf("Release = %v", err)
		}
		if !exists(t, e.Raw, l.LeaseKey()) || l.Err() != nil {
			t.Fatalf("a rejected release gave up the lease (key present %v, handle %v)", exists(t, e.Raw, l.LeaseKey()), l.Err())
		}
		j.setReject()
		if out, err := l.Release(ctx); err != nil || out != lock.Released {
			t.Fatalf("Release after the rejection = %v %v", out, err)
		}
		expect(t, j, "admit LOCK TRY ACQUIRE", "done LOCK TRY ACQUIRE succeeded",
			"admit LOCK EXTEND", "admit LOCK RELEASE", "admit LOCK RELEASE", "done LOCK RELEASE succeeded")
	})

	t.Run("rejected_close_propagates_and_retries", func(t *testing.T) {
		l, err := locker.TryAcquire(ctx, "r3", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j.setReject("LOCK CLOSE")
		if err := l.Close(); err != errRejected { //nolint:errorlint // unchanged
			t.Fatalf("Close = %v", err)
		}
		if !exists(t, e.Raw, l.LeaseKey()) {
			t.Fatal("a rejected Close released the lease")
		}
		j.setReject()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if exists(t, e.Raw, l.LeaseKey()) {
			t.Fatal("the retried Close did not release")
		}
		expect(t, j, "admit LOCK TRY ACQUIRE", "done LOCK TRY ACQUIRE succeeded",
			"admit LOCK CLOSE", "admit LOCK CLOSE", "done LOCK CLOSE succeeded")
	})

	t.Run("one_completion_covers_waiting_attempts", func(t *testing.T) {
		held, err := locker.TryAcquire(ctx, "r4", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		j.take()
		// The waiting Acquire retries until the holder's lease expires: several attempts, one scope.
		l, err := locker.Acquire(ctx, "r4", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit LOCK ACQUIRE", "done LOCK ACQUIRE succeeded")
		_ = held
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		j.take()
	})

	t.Run("busy_is_succeeded_canceled_wait_is_canceled", func(t *testing.T) {
		l, err := locker.TryAcquire(ctx, "r5", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.TryAcquire(ctx, "r5", time.Minute); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		_, err = locker.Acquire(cctx, "r5", time.Minute)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit LOCK TRY ACQUIRE", "done LOCK TRY ACQUIRE succeeded",
			"admit LOCK TRY ACQUIRE", "done LOCK TRY ACQUIRE succeeded",
			"admit LOCK ACQUIRE", "done LOCK ACQUIRE canceled",
			"admit LOCK RELEASE", "done LOCK RELEASE succeeded")
	})

	t.Run("calls_from_a_hook_get_their_own_scope", func(t *testing.T) {
		j.mu.Lock()
		j.inside = func(ctx context.Context, op luakit.Operation) {
			if op.Name == "LOCK TRY ACQUIRE" {
				if _, err := locker.Inspect(ctx, "r6"); err != nil {
					t.Error(err)
				}
			}
		}
		j.mu.Unlock()
		defer func() { j.mu.Lock(); j.inside = nil; j.mu.Unlock() }()
		l, err := locker.TryAcquire(ctx, "r6", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		j.inside = nil
		j.mu.Unlock()
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		expect(t, j, "admit LOCK TRY ACQUIRE", "admit LOCK INSPECT", "done LOCK INSPECT succeeded",
			"done LOCK TRY ACQUIRE succeeded", "admit LOCK RELEASE", "done LOCK RELEASE succeeded")
	})

	t.Run("keepalive_renewals_each_admitted_rejection_keeps_lease", func(t *testing.T) {
		l, err := locker.TryAcquire(ctx, "r7", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		j.take()
		j.setReject("LOCK EXTEND")
		kctx, stop := context.WithCancel(ctx)
		if err := l.KeepAlive(kctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, j, "admit LOCK EXTEND")
		if l.Err() != nil {
			t.Fatalf("a rejected renewal ended the handle: %v", l.Err())
		}
		j.setReject()
		waitFor(t, j, "done LOCK EXTEND succeeded")
		stop()
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		j.take()
	})
}

// testHooksComposeInOrder checks that several hooks admit in order and complete in reverse, and that
// a rejection by a later hook completes the earlier ones and sends nothing, on a real lease.
func testHooksComposeInOrder(t *testing.T, e *env) {
	client := e.client(t)
	ctx := context.Background()
	order := &orderHook{}
	leases, err := lease.New(client, lease.WithHooks(order.named("a"), order.named("b")), lease.WithHooks(order.named("c")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.ForceRelease(ctx, "compose", "f"); err != nil {
		t.Fatal(err)
	}
	if got, want := order.take(), []string{"a admit", "b admit", "c admit", "c done", "b done", "a done"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	order.rejectAt = "b"
	if _, err := leases.ForceRelease(ctx, "compose", "f"); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("ForceRelease = %v, want the rejection unchanged", err)
	}
	if got, want := order.take(), []string{"a admit", "b admit", "a done failed"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}

type orderHook struct {
	mu       sync.Mutex
	log      []string
	rejectAt string
}

func (o *orderHook) named(name string) luakit.Hook {
	return luakit.HookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.log = append(o.log, name+" admit")
		if o.rejectAt == name {
			return nil, nil, errRejected
		}
		return ctx, func(out luakit.HookOutcome, err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			s := name + " done"
			if out == luakit.OutcomeFailed {
				s += " failed"
			}
			o.log = append(o.log, s)
		}, nil
	})
}

func (o *orderHook) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.log
	o.log = nil
	return out
}

// waitFor polls j until entry appears; the bound only turns a missing entry into a failure instead of
// a hang (the renewals it waits for come every 100ms).
func waitFor(t *testing.T, j *journal, entry string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if slices.Contains(j.take(), entry) {
			return
		}
	}
	t.Fatalf("no %q in the hook journal", entry)
}
