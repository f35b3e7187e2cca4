package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// gate is a hook that records operation names and outcomes and rejects while reject is set.
type gate struct {
	mu     sync.Mutex
	reject error
	log    []string
}

func (g *gate) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reject != nil {
		g.log = append(g.log, op.Name+" rejected")
		return nil, nil, g.reject
	}
	g.log = append(g.log, op.Name)
	return ctx, func(o luakit.HookOutcome, err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.log = append(g.log, op.Name+" "+o.String())
	}, nil
}

func (g *gate) set(err error) { g.mu.Lock(); g.reject = err; g.mu.Unlock() }

func (g *gate) journal() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

func TestHookRejectionKeepsHandle(t *testing.T) {
	errNo := errors.New("rejected")
	g := &gate{reject: errNo}
	b := &fakeBackend{held: true}
	h := &Handle{}
	cfg := &Config{Name: "test", Logger: quiet, Hooks: luakit.Hooks{g}}
	if err := h.Grant(context.Background(), b, cfg, time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, err := h.Extend(ctx); ok || err != errNo { //nolint:errorlint // unchanged
		t.Fatalf("Extend = %v, %v; want the rejection", ok, err)
	}
	if ok, err := h.Verify(ctx); ok || err != errNo { //nolint:errorlint // unchanged
		t.Fatalf("Verify = %v, %v; want the rejection", ok, err)
	}
	if _, err := h.Release(ctx); err != errNo { //nolint:errorlint // unchanged
		t.Fatalf("Release = %v; want the rejection", err)
	}
	if err := h.Close(); err != errNo { //nolint:errorlint // unchanged
		t.Fatalf("Close = %v; want the rejection", err)
	}
	if b.extends.Load() != 0 || b.releases.Load() != 0 || h.Err() != nil {
		t.Fatalf("rejected operations reached the backend (%d extends, %d releases) or ended the handle (%v)",
			b.extends.Load(), b.releases.Load(), h.Err())
	}
	g.set(nil)
	if err := h.Close(); err != nil {
		t.Fatalf("retried Close: %v", err)
	}
	if b.releases.Load() != 1 {
		t.Fatalf("retried Close sent %d releases, want 1", b.releases.Load())
	}
	want := []string{"TEST EXTEND rejected", "TEST VERIFY rejected", "TEST RELEASE rejected", "TEST CLOSE rejected",
		"TEST CLOSE", "TEST CLOSE succeeded"}
	if got := g.journal(); !equal(got, want) {
		t.Fatalf("journal %q, want %q", got, want)
	}
}

func TestHookKeepAliveRenewalsAdmitted(t *testing.T) {
	g := &gate{}
	b := &fakeBackend{held: true}
	h := &Handle{}
	cfg := &Config{Name: "t", Logger: quiet, Hooks: luakit.Hooks{g}, RenewFraction: 0.1}
	if err := h.Grant(context.Background(), b, cfg, time.Now(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := h.KeepAlive(context.Background()); err != nil {
		t.Fatal(err)
	}
	for b.extends.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := g.journal()
	if len(got) < 6 || got[0] != "T EXTEND" || got[1] != "T EXTEND succeeded" ||
		got[len(got)-2] != "T RELEASE" || got[len(got)-1] != "T RELEASE succeeded" {
		t.Fatalf("journal %q: want renewals as T EXTEND, then T RELEASE", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHookRejectedRenewalRetried: a hook's rejection of a background renewal is retried whatever its
// class (here one that classifies terminal, like an ACL refusal), and never ends the handle.
func TestHookRejectedRenewalRetried(t *testing.T) {
	g := &gate{reject: fmt.Errorf("budget spent: %w", luakit.ErrNoPermission)}
	b := &fakeBackend{held: true}
	h := &Handle{}
	cfg := &Config{Name: "t", Logger: quiet, Hooks: luakit.Hooks{g}, RenewFraction: 0.1, RetryDelay: time.Millisecond}
	if err := h.Grant(context.Background(), b, cfg, time.Now(), time.Second); err != nil {
		t.Fatal(err)
	}
	if !luakit.IsTerminal(g.reject) {
		t.Fatal("the rejection must classify terminal for this test")
	}
	if err := h.KeepAlive(context.Background()); err != nil {
		t.Fatal(err)
	}
	for rejected := 0; rejected < 3; {
		rejected = 0
		for _, l := range g.journal() {
			if l == "T EXTEND rejected" {
				rejected++
			}
		}
		if err := h.Err(); err != nil {
			t.Fatalf("a rejected renewal ended the handle: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	g.set(nil)
	for b.extends.Load() == 0 {
		if err := h.Err(); err != nil {
			t.Fatalf("the handle ended: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
