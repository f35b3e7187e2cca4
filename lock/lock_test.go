package lock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a rueidis.Client whose every method except Mode panics: validation tests use it to prove that
// bad input is rejected before any I/O.
type noIO struct {
	rueidis.Client
	mode rueidis.ClientMode
}

func (c noIO) Mode() rueidis.ClientMode { return c.mode }

func TestNew(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrNilClient) {
		t.Fatalf("New(nil) = %v, want ErrNilClient", err)
	}
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"prefix", WithKeyPrefix("app:"), true},
		{"binary prefix", WithKeyPrefix("\x00\xff{t}"), true},
		{"tracker", WithTracker(luakit.NewTracker()), true},
		{"nil tracker: the client's", WithTracker(nil), true},
		{"fraction max", WithRenewFraction(0.9), true},
		{"fraction", WithRenewFraction(0.5), true},
		{"fraction zero", WithRenewFraction(0), false},
		{"fraction too large", WithRenewFraction(0.95), false},
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry negative", WithRetryDelay(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), false},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%s) error = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if tt.ok && l == nil {
				t.Fatal("nil Locker without error")
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	tests := []struct {
		name         string
		mode         rueidis.ClientMode
		prefix       string
		lease, fence string
		ttl          time.Duration
		want         error
	}{
		{"empty lease key", rueidis.ClientModeStandalone, "", "", "f", time.Second, luakit.ErrEmptyKey},
		{"empty fence key", rueidis.ClientModeStandalone, "", "l", "", time.Second, luakit.ErrEmptyKey},
		{"zero ttl", rueidis.ClientModeStandalone, "", "l", "f", 0, ErrInvalidTTL},
		{"sub-ms ttl", rueidis.ClientModeStandalone, "", "l", "f", 999 * time.Microsecond, ErrInvalidTTL},
		{"negative ttl", rueidis.ClientModeStandalone, "", "l", "f", -time.Second, ErrInvalidTTL},
		{"same key", rueidis.ClientModeStandalone, "", "k", "k", time.Second, ErrSameKey},
		{"same key after prefix", rueidis.ClientModeStandalone, "p:", "k", "k", time.Second, ErrSameKey},
		{"cross slot on cluster", rueidis.ClientModeCluster, "", "a:lease", "b:fence", time.Second, luakit.ErrCrossSlot},
		{"prefix tag moves both but keys still differ", rueidis.ClientModeCluster, "", "{a}x", "{b}x", time.Second, luakit.ErrCrossSlot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(noIO{mode: tt.mode}, WithKeyPrefix(tt.prefix))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.TryAcquire(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) {
				t.Errorf("TryAcquire error = %v, want %v", err, tt.want)
			}
			if _, err := l.Acquire(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) {
				t.Errorf("Acquire error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPrepareSameSlot(t *testing.T) {
	l, err := New(noIO{mode: rueidis.ClientModeCluster}, WithKeyPrefix("{tenant}"))
	if err != nil {
		t.Fatal(err)
	}
	// A prefix with a hash tag puts every key in its slot, so these distinct keys are accepted.
	k, ms, err := l.prepare("a:lease", "b:fence", 1500*time.Microsecond)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if k.lease != "{tenant}a:lease" || k.fence != "{tenant}b:fence" || ms != 1 {
		t.Fatalf("prepare = %+v, %d; want prefixed keys and 1ms (truncated)", k, ms)
	}
}

func TestCounterError(t *testing.T) {
	for _, r := range []CounterReason{CounterExpiring, CounterNegative, CounterMalformed, CounterOverflow, CounterWrongType, "other"} {
		err := error(&CounterError{Reason: r})
		if !errors.Is(err, ErrCounter) {
			t.Errorf("%s: not ErrCounter", r)
		}
		if !strings.HasPrefix(err.Error(), "lock: ") {
			t.Errorf("%s: message %q lacks package prefix", r, err.Error())
		}
	}
}

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 0: "Outcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestFence(t *testing.T) {
	var f Fence[string]
	steps := []struct {
		token int64
		value string
		want  bool
	}{
		{0, "zero", false},
		{-1, "negative", false},
		{12, "new owner", true},
		{11, "stale owner", false},
		{12, "same lease again", true},
		{13, "next owner", true},
	}
	for _, s := range steps {
		if got := f.TryWrite(s.token, s.value); got != s.want {
			t.Errorf("TryWrite(%d) = %v, want %v", s.token, got, s.want)
		}
	}
	v, last := f.Value()
	if v != "next owner" || last != 13 {
		t.Errorf("Value = %q, %d", v, last)
	}
	if a, r := f.Counts(); a != 3 || r != 3 {
		t.Errorf("Counts = %d, %d; want 3, 3", a, r)
	}
}

func TestFence_Concurrent(t *testing.T) {
	var f Fence[int64]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); i <= 1000; i++ {
				f.TryWrite(i, i)
			}
		}()
	}
	wg.Wait()
	v, last := f.Value()
	if v != 1000 || last != 1000 {
		t.Fatalf("Value = %d, %d; want 1000, 1000", v, last)
	}
	a, r := f.Counts()
	if a+r != 8000 || a < 1000 {
		t.Fatalf("Counts = %d, %d", a, r)
	}
}

// TestSharedErrors: the ownership errors are luakit's values, so errors.Is agrees across primitives.
func TestSharedErrors(t *testing.T) {
	for _, p := range []struct{ lock, shared error }{
		{ErrNotAcquired, luakit.ErrNotAcquired},
		{ErrLateReply, luakit.ErrLateReply},
		{ErrUncertain, luakit.ErrUncertain},
		{ErrLost, luakit.ErrLost},
		{ErrExpired, luakit.ErrExpired},
		{ErrReleased, luakit.ErrReleased},
		{ErrKeepAliveRunning, luakit.ErrKeepAliveRunning},
	} {
		if p.lock != p.shared {
			t.Errorf("%v is not luakit's %v", p.lock, p.shared)
		}
	}
}

// TestDecode: the owner-checked scripts' replies, and unexpected shapes as errors (not uncertain).
func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		decode func(int64) (bool, error)
		reply  int64
		held   bool
		ok     bool
	}{
		{"extend renewed", decodeExtend, 1, true, true},
		{"extend not ours", decodeExtend, 0, false, true},
		{"extend unexpected", decodeExtend, 2, false, false},
		{"verify pttl", decodeVerify, 1500, true, true},
		{"verify no expiry", decodeVerify, -1, true, true},
		{"verify zero pttl", decodeVerify, 0, true, true},
		{"verify not ours", decodeVerify, -2, false, true},
		{"verify unexpected", decodeVerify, -3, false, false},
		{"release deleted", decodeRelease, 1, true, true},
		{"release absent", decodeRelease, 0, false, true},
		{"release other owner", decodeRelease, -1, false, true},
		{"release unexpected", decodeRelease, 5, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, err := tt.decode(tt.reply)
			if held != tt.held || (err == nil) != tt.ok {
				t.Fatalf("decode(%d) = %v, %v; want %v, ok=%v", tt.reply, held, err, tt.held, tt.ok)
			}
			if err != nil && (errors.Is(err, ErrUncertain) || luakit.IsUncertain(err)) {
				t.Fatalf("an unexpected reply must not be uncertain: %v", err)
			}
		})
	}
}

// recording is a standalone client whose Do records each command and answers it with err.
type recording struct {
	rueidis.Client
	err  error
	mu   sync.Mutex
	cmds [][]string
}

func (c *recording) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *recording) B() rueidis.Builder       { return rueidis.Builder{} }
func (c *recording) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, append([]string(nil), cmd.Commands()...))
	return rueidis.NewErrorResult(c.err)
}

func (c *recording) sent() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.cmds...)
}

// TestLateGrant: a grant whose reply came after the local estimate elapsed is ErrLateReply, and the
// owner-checked release is sent for it.
func TestLateGrant(t *testing.T) {
	c := &recording{err: errors.New("refused")}
	l, err := New(c, WithCleanupTimeout(100*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.grant(context.Background(), keys{lease: "l", fence: "f"}, "l", "f", "owner", 3, time.Now().Add(-time.Second), 10*time.Millisecond)
	if h != nil || !errors.Is(err, ErrLateReply) {
		t.Fatalf("late grant = %v, %v; want nil, ErrLateReply", h, err)
	}
	cmds := c.sent()
	if len(cmds) != 1 || cmds[0][0] != "EVALSHA" || cmds[0][1] != releaseScript.SHA1() || cmds[0][3] != "l" || cmds[0][4] != "owner" {
		t.Fatalf("cleanup sent %q, want one owner-checked release of l", cmds)
	}
}

// TestExtendTTL: a TTL under 1ms is refused before any I/O (PEXPIRE 0 would delete the lease), and a
// TTL is sent in whole milliseconds.
func TestExtendTTL(t *testing.T) {
	c := &recording{err: errors.New("refused")}
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.grant(context.Background(), keys{lease: "l", fence: "f"}, "l", "f", "owner", 3, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background()) //nolint:errcheck // the client refuses: stops the timer only
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		if ok, err := h.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, %v; want ErrInvalidTTL", ttl, ok, err)
		}
	}
	if n := len(c.sent()); n != 0 {
		t.Fatalf("an invalid TTL sent %d commands", n)
	}
	if ok, err := h.ExtendTTL(context.Background(), 1500*time.Microsecond); ok || err == nil {
		t.Fatalf("ExtendTTL on a refusing client = %v, %v", ok, err)
	}
	cmds := c.sent()
	if len(cmds) != 1 || cmds[0][1] != extendScript.SHA1() || cmds[0][5] != "1" {
		t.Fatalf("ExtendTTL(1.5ms) sent %q, want extend with 1 ms", cmds)
	}
	if h.TTL() != time.Minute || h.Err() != nil {
		t.Fatalf("a refused renewal changed the handle: TTL %v, Err %v", h.TTL(), h.Err())
	}
}

// TestLeaseLocalState covers the handle's local bookkeeping without a server: the estimate, Done on
// expiry, and Extend refusing without I/O once the estimate elapsed.
func TestLeaseLocalState(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.grant(context.Background(), keys{lease: "l", fence: "f"}, "l", "f", "owner", 7, time.Now(), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if h.FencingToken() != 7 || h.OwnerToken() != "owner" || h.LeaseKey() != "l" || h.FenceKey() != "f" || h.TTL() != 20*time.Millisecond {
		t.Fatal("accessors disagree with construction")
	}
	if h.Err() != nil || h.Remaining() <= 0 {
		t.Fatalf("fresh lease: Err=%v Remaining=%v", h.Err(), h.Remaining())
	}
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the estimate elapsed")
	}
	if !errors.Is(h.Err(), ErrExpired) || !errors.Is(context.Cause(h.Context()), ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", h.Err())
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining after expiry = %v", h.Remaining())
	}
	// noIO would panic if Extend or Verify contacted the server.
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v; want false, nil", ok, err)
	}
	if ok, err := h.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after expiry = %v, %v; want false, nil", ok, err)
	}
	if err := h.KeepAlive(context.Background()); !errors.Is(err, ErrExpired) {
		t.Fatalf("KeepAlive after expiry = %v", err)
	}
}
