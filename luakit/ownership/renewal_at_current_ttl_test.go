package ownership

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRenewalWaitingForExtendTTLUsesItsTTL: a renewal at the current TTL (Extend; a keep-alive round
// runs the same path) that waits for a concurrent ExtendTTL renews at the TTL ExtendTTL set, so the
// handle's TTL stays the caller's. It read the TTL before waiting, and put the old one back.
func TestRenewalWaitingForExtendTTLUsesItsTTL(t *testing.T) {
	var (
		mu   sync.Mutex
		ttls []time.Duration
	)
	gate := make(chan struct{})
	b := &fakeBackend{held: true}
	b.extendFn = func(context.Context) (bool, error) {
		if b.extends.Load() == 1 {
			<-gate // the ExtendTTL below stays in flight until Extend waits for it
		}
		return true, nil
	}
	rec := &recordingBackend{fakeBackend: b, mu: &mu, ttls: &ttls}
	h := grant(t, b, 3*time.Second)
	h.b = rec

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if ok, err := h.ExtendTTL(context.Background(), 450*time.Millisecond); !ok || err != nil {
			t.Errorf("ExtendTTL = %v, %v", ok, err)
		}
	}()
	for b.extends.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	go func() {
		defer wg.Done()
		if ok, err := h.Extend(context.Background()); !ok || err != nil {
			t.Errorf("Extend = %v, %v", ok, err)
		}
	}()
	for waiting := false; !waiting; time.Sleep(time.Millisecond) {
		h.mu.Lock()
		waiting = h.opWait != nil
		h.mu.Unlock()
	}
	close(gate)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(ttls) != 2 || ttls[0] != 450*time.Millisecond || ttls[1] != 450*time.Millisecond {
		t.Fatalf("renewals sent at %v, want [450ms 450ms]", ttls)
	}
	if got := h.TTL(); got != 450*time.Millisecond {
		t.Fatalf("TTL %v after ExtendTTL(450ms) and Extend, want 450ms", got)
	}
}

// recordingBackend records the TTL of every renewal sent to the fake.
type recordingBackend struct {
	*fakeBackend
	mu   *sync.Mutex
	ttls *[]time.Duration
}

func (r *recordingBackend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	r.mu.Lock()
	*r.ttls = append(*r.ttls, ttl)
	r.mu.Unlock()
	return r.fakeBackend.Extend(ctx, ttl)
}
