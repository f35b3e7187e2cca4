package ownership

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/hooktest"
)

// TestOwedCleanupsAreNotAdmitted: the releases a handle owes after an admitted operation (the cleanup
// after a late or uncertain acquisition: no reply, an unknown error, a malformed reply; the surrender
// after a late renewal; the retries of a Close whose release failed) are part of that operation and
// open no hook scope (docs/hooks.md). A hook that rejects every "TEST RELEASE" therefore cannot stop
// them: each reaches the backend and removes the hold, and the hook sees no RELEASE.
func TestOwedCleanupsAreNotAdmitted(t *testing.T) {
	tests := []struct {
		name string
		// owe runs the path that owes the cleanup, with cfg's hooks, over b.
		owe func(t *testing.T, cfg *Config, b *fakeBackend)
		// want is the hook's journal: the admitted operation the cleanup belongs to, if any.
		want []string
		// releases is how many releases reach the backend: the owed one, after any that failed.
		releases int32
	}{
		{name: "late acquisition", owe: func(t *testing.T, cfg *Config, b *fakeBackend) {
			h := &Handle{}
			if err := h.Grant(context.Background(), b, cfg, time.Now().Add(-2*time.Second), time.Second); !errors.Is(err, luakit.ErrLateReply) {
				t.Fatalf("Grant after the estimate elapsed = %v, want ErrLateReply", err)
			}
		}, releases: 1},
		{name: "acquisition without a reply", owe: tryOwing(fakeAcquirer{sendErr: io.ErrUnexpectedEOF}), releases: 1},
		{name: "acquisition with an unknown error", owe: tryOwing(fakeAcquirer{sendErr: errors.New("boom")}), releases: 1},
		{name: "acquisition with a malformed reply", owe: tryOwing(fakeAcquirer{decodeErr: errors.New("unexpected status 7")}), releases: 1},
		{name: "late renewal surrender", owe: func(t *testing.T, cfg *Config, b *fakeBackend) {
			const ttl = 50 * time.Millisecond
			b.extendFn = func(context.Context) (bool, error) {
				time.Sleep(ttl + 20*time.Millisecond) // renewed on the server, answered after the estimate
				return true, nil
			}
			h := &Handle{}
			if err := h.Grant(context.Background(), b, cfg, time.Now(), ttl); err != nil {
				t.Fatal(err)
			}
			if ok, err := h.Extend(context.Background()); ok || err != nil {
				t.Fatalf("late Extend = %v, %v; want false, nil", ok, err)
			}
			h.mu.Lock()
			settled := h.settled
			h.mu.Unlock()
			if !errors.Is(h.Err(), luakit.ErrExpired) || !settled {
				t.Fatalf("after the late renewal: Err %v, settled %v; want ErrExpired and a settled surrender", h.Err(), settled)
			}
		}, want: []string{"admit TEST EXTEND @", "done TEST EXTEND succeeded"}, releases: 1},
		{name: "Close's retried release", owe: func(t *testing.T, cfg *Config, b *fakeBackend) {
			errBroken := errors.New("broken connection")
			b.release = func(context.Context) (bool, error) {
				if b.releases.Load() == 1 {
					return false, errBroken // Close's own release: no answer
				}
				b.mu.Lock()
				defer b.mu.Unlock()
				was := b.held
				b.held = false
				return was, nil
			}
			cfg.RetryClose = func(_ error, release func(context.Context) error) {
				if err := release(context.Background()); err != nil { // the primitive's background retry
					t.Errorf("retried release: %v", err)
				}
			}
			h := &Handle{}
			if err := h.Grant(context.Background(), b, cfg, time.Now(), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := h.Close(); !errors.Is(err, errBroken) {
				t.Fatalf("Close = %v, want its release's error", err)
			}
		}, want: []string{"admit TEST CLOSE @", "done TEST CLOSE failed"}, releases: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &hooktest.Recorder{}
			rec.Reject("TEST RELEASE")
			cfg := &Config{Name: "test", Logger: quiet, Hooks: luakit.Hooks{rec}}
			b := &fakeBackend{held: true}
			tc.owe(t, cfg, b)
			if n := b.releases.Load(); n != tc.releases || b.held {
				t.Fatalf("%d releases reached the backend, hold left %v; want %d, the last one removing it", n, b.held, tc.releases)
			}
			got := rec.Take()
			for _, e := range got {
				if strings.Contains(e, "RELEASE") {
					t.Fatalf("journal %q: the owed cleanup was admitted as a RELEASE", got)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("journal %q, want %q", got, tc.want)
			}
		})
	}
}

// owingAttempt is an acquisition attempt scripted by fakeAcquirer whose owner-checked cleanup is b's
// Release.
type owingAttempt struct {
	fakeAcquirer
	b *fakeBackend
}

func (a *owingAttempt) ReleaseAcquire(ctx context.Context) (bool, error) { return a.b.Release(ctx) }

// tryOwing returns a case that sends one attempt, answered as script says, through Config.Try, which
// owes the attempt's cleanup.
func tryOwing(script fakeAcquirer) func(t *testing.T, cfg *Config, b *fakeBackend) {
	return func(t *testing.T, cfg *Config, b *fakeBackend) {
		if got := cfg.Try(context.Background(), "acquire", &owingAttempt{fakeAcquirer: script, b: b}); got.Err == nil {
			t.Fatal("the attempt acquired; want a failure that owes the cleanup")
		}
	}
}
