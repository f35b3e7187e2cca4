package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestDecisionPathTakesNoLock: AllowN of a Limiter and of a Keyed (with and without local state for
// the key) completes while the instance's mutex is held by someone else: the decision path takes no
// lock (n above the capacity is decided without I/O, through the same path).
func TestDecisionPathTakesNoLock(t *testing.T) {
	l := newTestLimiter(t, noIO{}, "k", fw10)
	k, err := NewKeyed(noIO{}, fw10, WithQueue(5, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	if _, err := k.WaitN(context.Background(), "with-state", 11); err == nil {
		t.Fatal("WaitN above the capacity succeeded")
	}
	if k.KeyCount() != 1 {
		t.Fatalf("%d keys with state, want 1", k.KeyCount())
	}
	for name, call := range map[string]func() (Result, error){
		"Limiter":                 func() (Result, error) { return l.AllowN(context.Background(), 11) },
		"Keyed, no local state":   func() (Result, error) { return k.AllowN(context.Background(), "stateless", 11) },
		"Keyed, with local state": func() (Result, error) { return k.AllowN(context.Background(), "with-state", 11) },
	} {
		l.mu.Lock()
		k.mu.Lock()
		done := make(chan error, 1)
		go func() {
			_, err := call()
			done <- err
		}()
		blocked := false
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: AllowN blocked on a held mutex", name)
			blocked = true
		}
		k.mu.Unlock()
		l.mu.Unlock()
		if blocked {
			<-done
		}
	}
}
