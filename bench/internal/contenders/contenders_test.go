package contenders

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startServer starts Redis 8 (Redis 7.0 when Redis 8 is not installed and no external server is set).
func startServer(t *testing.T) *testkit.Server {
	t.Helper()
	target := testkit.Redis8
	if os.Getenv(testkit.EnvRedisURL) == "" {
		if _, err := testkit.Binary(target); err != nil {
			target = testkit.Redis70
		}
	}
	return testkit.Start(t, target)
}

var keySeq int

func freshKey(t *testing.T) string {
	keySeq++
	return "ckcontenders:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" + t.Name() + ":" + strconv.Itoa(keySeq)
}

// TestLocks runs every lock contender's cycle (those of Locks and of CoordkitConditional) twice on one
// key: the second cycle succeeds only if the first released the lock; and checks that a held key is
// refused.
func TestLocks(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	specs := slices.Clone(Locks)
	for _, spec := range CoordkitConditional {
		if !slices.ContainsFunc(specs, func(o LockSpec) bool { return o.Name == spec.Name }) {
			specs = append(specs, spec)
		}
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			l, err := spec.New(FromTestkit(s))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.Name() != spec.Name {
				t.Errorf("Name() = %q, want %q", l.Name(), spec.Name)
			}
			key := freshKey(t)
			for i := range 2 {
				if err := l.TryAcquireRelease(ctx, key); err != nil {
					t.Fatalf("cycle %d: %v", i+1, err)
				}
			}
		})
	}
}

// TestHandoffs runs one hand-off of every hand-off contender: the waiter's Wait returns with the
// lock after the holder's release, and its release lets the holder take the key again.
func TestHandoffs(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, spec := range Handoffs {
		t.Run(spec.Name, func(t *testing.T) {
			h, err := spec.New(FromTestkit(s))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			key := freshKey(t)
			release, err := h.Hold(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				release Release
				err     error
			}
			done := make(chan result, 1)
			go func() {
				r, err := h.Wait(ctx, key)
				done <- result{r, err}
			}()
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if err := r.release(ctx); err != nil {
				t.Fatal(err)
			}
			again, err := h.Hold(ctx, key)
			if err != nil {
				t.Fatalf("hold after the waiter's release: %v", err)
			}
			if err := again(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDeciders makes one decision of every GCRA contender: it admits.
func TestDeciders(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	for _, spec := range Deciders {
		t.Run(spec.Name, func(t *testing.T) {
			d, err := spec.New(FromTestkit(s))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ok, err := d.Decide(ctx, "{"+freshKey(t)+"}")
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Error("refused; every decision of a fresh key is sized to admit")
			}
		})
	}
}

// TestRawGCRARefuses checks that the raw GCRA script refuses beyond its burst (it is a GCRA, not a
// counter that always admits): with the burst's debt taken, the next decision is refused.
func TestRawGCRARefuses(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	d, err := NewRawGCRA(FromTestkit(s))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := d.(*rawGCRA)
	r.args = []string{strconv.FormatInt(time.Hour.Microseconds(), 10), "2"} // burst 2, one permit per hour
	key := "{" + freshKey(t) + "}"
	for i, want := range []bool{true, true, false} {
		ok, err := d.Decide(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok != want {
			t.Errorf("decision %d: allowed %v, want %v", i+1, ok, want)
		}
	}
}
