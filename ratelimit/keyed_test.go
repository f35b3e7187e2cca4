package ratelimit

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/ratelimit/internal/closetest"
)

func TestNewKeyedValidation(t *testing.T) {
	dl := testDenyList(t)
	if _, err := NewKeyed(nil, fw10); !errors.Is(err, ErrNilClient) {
		t.Fatalf("nil client: %v", err)
	}
	if _, err := NewKeyed(noIO{}, FixedWindow{}); !errors.Is(err, ErrInvalidPolicy) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("invalid policy: %v", err)
	}
	for name, opt := range map[string]KeyedOption{
		"zero max keys":     WithMaxKeys(0),
		"zero idle timeout": WithIdleTimeout(0),
		"negative queue":    WithQueue(-1, OldestFirst),
		"negative version":  WithPolicyVersion(-1),
		"version too large": WithPolicyVersion(MaxPolicyVersion + 1),
	} {
		k, err := NewKeyed(noIO{}, fw10, opt)
		if err == nil {
			_ = k.Close(context.Background())
			t.Errorf("%s: NewKeyed succeeded", name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "ratelimit: ") {
			t.Errorf("%s: NewKeyed = %v, want a ratelimit: error matching ErrInvalidConfig", name, err)
		}
	}
	k, err := NewKeyed(noIO{}, fw10, WithKeyedDenyList(dl, nil), WithMaxKeys(3), WithIdleTimeout(time.Second),
		WithQueue(2, NewestFirst), WithKeyPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Validation and decisions above the capacity need no I/O and create no local state; Close stops the
// background goroutine (goleak checks) and later calls fail with ErrClosed.
func TestKeyedLocal(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10, WithQueue(5, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, call := range []func() (Result, error){
		func() (Result, error) { return k.AllowN(ctx, "", 1) },
		func() (Result, error) { return k.WaitN(ctx, "", 1) },
	} {
		if _, err := call(); !errors.Is(err, luakit.ErrEmptyKey) || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("empty key: %v", err)
		}
	}
	if _, err := k.WaitN(ctx, "a", -1); !errors.Is(err, ErrNegativePermits) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative: %v", err)
	}
	res, err := k.AllowN(ctx, "a", 11)
	if err != nil || res.Allowed || res.Reason != ReasonCapacity || res.RetryAfter != 0 {
		t.Fatalf("AllowN above the capacity = %+v, %v", res, err)
	}
	if n := k.KeyCount(); n != 0 {
		t.Fatalf("AllowN created local state: %d keys", n)
	}
	res, err = k.WaitN(ctx, "a", 11) // creates the key's state; decided locally
	if !errors.Is(err, ErrExceedsCapacity) || res.Allowed || res.RetryAfter != 0 {
		t.Fatalf("WaitN above the capacity = %+v, %v", res, err)
	}
	if st := k.KeyStats("a"); st != (Stats{Rejected: 1, Available: -1}) || k.KeyCount() != 1 {
		t.Fatalf("Stats = %+v with %d keys", st, k.KeyCount())
	}
	if st := k.KeyStats("none"); st != (Stats{Available: -1}) {
		t.Fatalf("Stats of a key without state = %+v", st)
	}
	if k.Policy() != Policy(fw10) {
		t.Fatalf("Policy = %+v", k.Policy())
	}
	for range 2 {
		if err := k.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.AllowN(ctx, "a", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllowN after Close = %v", err)
	}
	if _, err := k.WaitN(ctx, "a", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitN after Close = %v", err)
	}
	if n := k.KeyCount(); n != 0 {
		t.Fatalf("%d keys after Close", n)
	}
}

// Keyed.Close waits for its background work (a stand-in for the sweep goroutine) until its ctx ends.
func TestKeyedCloseWaitsUntilCtxEnds(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-release
	}()
	closetest.Waits(t, k.Close, release, func() error { _, err := k.AllowN(context.Background(), "a", 1); return err })
}

// The least recently used idle key is evicted when WithMaxKeys is reached; a key in use is not.
func TestKeyedMaxKeysLRU(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10, WithQueue(5, OldestFirst), WithMaxKeys(2))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	ctx := context.Background()
	for _, key := range []string{"a", "b", "a", "c"} { // b is then the least recently used
		if _, err := k.WaitN(ctx, key, 11); !errors.Is(err, ErrExceedsCapacity) {
			t.Fatal(err)
		}
	}
	if k.KeyCount() != 2 || k.KeyStats("b").Available != -1 || k.KeyStats("a").Rejected != 2 || k.KeyStats("c").Rejected != 1 {
		t.Fatalf("keys %d, a %+v, b %+v, c %+v", k.KeyCount(), k.KeyStats("a"), k.KeyStats("b"), k.KeyStats("c"))
	}
	// Both keys in use: a new key gets no state.
	ea, _ := k.acquire("a", false)
	ec, _ := k.acquire("c", false)
	if e, err := k.acquire("d", true); e != nil || err != nil {
		t.Fatalf("acquire with every key in use = %v, %v", e, err)
	}
	k.release(ea)
	k.release(ec)
	if e, err := k.acquire("d", true); e == nil || err != nil {
		t.Fatalf("acquire after release = %v, %v", e, err)
	} else {
		k.release(e)
	}
	if k.KeyStats("a").Available != -1 || k.KeyCount() != 2 {
		t.Fatalf("a (least recently released) not evicted: %d keys", k.KeyCount())
	}
}

// The background goroutine drops the state of a key idle for the idle timeout.
func TestKeyedIdleTimeout(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10, WithQueue(5, OldestFirst), WithIdleTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	if _, err := k.WaitN(context.Background(), "a", 11); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for k.KeyCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle key was never dropped")
		}
		time.Sleep(time.Millisecond)
	}
	if st := k.KeyStats("a"); st != (Stats{Available: -1}) {
		t.Fatalf("Stats after the drop = %+v", st)
	}
}

// The identity function runs without the Keyed's lock held: it may call the Keyed (here Keys)
// without deadlocking.
func TestKeyedIdentityFuncUnlocked(t *testing.T) {
	client := &blocking{}
	dl, err := denylist.New(client, slot0Key(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.Close(context.Background()) })
	var k *Keyed
	called := make(chan int, 4)
	k, err = NewKeyed(client, fw10, WithQueue(5, OldestFirst), WithKeyedDenyList(dl, func(key string) string {
		called <- k.KeyCount()
		return key
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := k.WaitN(ctx, slot0Key(t), 1)
		done <- err
	}()
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		// Not closing k: Close would deadlock too.
		t.Fatal("the identity function could not call the Keyed: it runs under the Keyed's lock")
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN = %v, want the deny-list read ended by the cancellation", err)
	}
}

// Keyed.SetPolicy validates before changing anything and does no I/O (noIO panics on any command).
func TestKeyedUpdateValidation(t *testing.T) {
	comp := Composite{Components: []Component{FixedWindow{Limit: 5, Window: time.Second}}}
	tests := []struct {
		name  string
		from  Policy
		to    Policy
		want  error // nil: success
		after Policy
	}{
		{"invalid policy", fw10, FixedWindow{Limit: 0, Window: time.Second}, ErrInvalidPolicy, fw10},
		{"algorithm change", fw10, SlidingWindow{Limit: 1, Window: time.Second}, ErrInvalidUpdate, fw10},
		{"standalone to composite", fw10, comp, ErrInvalidUpdate, fw10},
		{"limit change", fw10, FixedWindow{Limit: 20, Window: time.Second}, nil, FixedWindow{Limit: 20, Window: time.Second}},
		{"component list change", comp,
			Composite{Components: []Component{TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Second}, FixedWindow{Limit: 2, Window: time.Minute}}},
			nil, Composite{Components: []Component{TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Second}, FixedWindow{Limit: 2, Window: time.Minute}}}},
		{"gcra interval", GCRA{Burst: 2, EmissionInterval: time.Second}, GCRA{Burst: 2, EmissionInterval: 3 * time.Second}, nil, GCRA{Burst: 2, EmissionInterval: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := NewKeyed(noIO{}, tt.from, WithPolicyVersion(7))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = k.Close(context.Background()) }()
			err = k.SetPolicy(context.Background(), tt.to)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Update: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Update: %v, want %v", err, tt.want)
			}
			if got := k.Policy(); !reflectEqual(got, tt.after) {
				t.Fatalf("Policy() = %#v, want %#v", got, tt.after)
			}
			c, _ := k.current()
			wantVer := int64(7)
			if tt.want == nil {
				wantVer = 8
			}
			verArg := c.keyedArgs[0] // the version, or for GCRA the suffix "|version|signature"
			if c.algo == algoGCRA {
				verArg = strings.Split(verArg, "|")[1]
			}
			if k.version != wantVer || !c.keyed || verArg != strconv.FormatInt(wantVer, 10) {
				t.Fatalf("version %d, args %q; want %d", k.version, c.keyedArgs, wantVer)
			}
		})
	}
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetPolicy(context.Background(), FixedWindow{Limit: 10, Window: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if k.version != 1 {
		t.Fatalf("a change of settings raises the version: %d", k.version)
	}
	// Equal after rounding up to whole microseconds: a no-op.
	if err := k.SetPolicy(context.Background(), FixedWindow{Limit: 10, Window: 2*time.Second - 999}); err != nil || k.version != 1 {
		t.Fatalf("equal settings: %v, version %d", err, k.version)
	}
	_ = k.Close(context.Background())
	if err := k.SetPolicy(context.Background(), fw10); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func reflectEqual(a, b Policy) bool { return reflect.DeepEqual(a, b) }
