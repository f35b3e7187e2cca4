package lock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

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
		{"nil logger", WithLogger(nil), true},
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
			l, err := New(noIO{ClientMode: tt.mode}, WithKeyPrefix(tt.prefix))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.TryAcquireKeys(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("TryAcquireKeys error = %v, want %v", err, tt.want)
			}
			if _, err := l.AcquireKeys(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("AcquireKeys error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPrepareSameSlot(t *testing.T) {
	l, err := New(noIO{ClientMode: rueidis.ClientModeCluster}, WithKeyPrefix("{tenant}"))
	if err != nil {
		t.Fatal(err)
	}
	// A prefix with a hash tag puts every key in its slot, so these distinct keys are accepted.
	r, err := l.explicit("a:lease", "b:fence", 1500*time.Microsecond)
	if err != nil {
		t.Fatalf("explicit: %v", err)
	}
	if r.lease() != "{tenant}a:lease" || r.fence() != "{tenant}b:fence" || r.ms != 1 || r.name != "" ||
		r.leaseKey != "a:lease" || r.fenceKey != "b:fence" {
		t.Fatalf("explicit = %+v; want prefixed keys and 1ms (truncated)", r)
	}
}

// TestKeys: the one-name form derives "{name}:lease" and "{name}:fence", after the prefix, and the two
// land in one Cluster slot whatever braces the name or the prefix hold, except where Redis's hash-tag
// rule cannot tag them (a name starting with '}', a prefix whose first braces are empty): those are
// rejected before any I/O on every client.
func TestKeys(t *testing.T) {
	lk, fk := Keys("invoice:42")
	if lk != "{invoice:42}:lease" || fk != "{invoice:42}:fence" {
		t.Fatalf("Keys = %q, %q", lk, fk)
	}
	tests := []struct {
		name, prefix string
		tag          string // the hash tag both physical keys share; "" when they cannot share one
	}{
		{"invoice:42", "", "invoice:42"},
		{"invoice:42", "app:", "invoice:42"},
		{"invoice:42", "{tenant}:", "tenant"}, // the prefix's tag comes first and wins
		{"a{b}c", "", "a{b"},                  // tag: up to the name's first '}'
		{"{x}", "", "{x"},                     // "{{x}}:lease": the first '}' ends the tag
		{"a}b", "", "a"},                      // "{a}b}:lease"
		{"\x00\xff", "", "\x00\xff"},          // binary-safe
		{"x", "pre{", "{x"},                   // an unclosed brace in the prefix: "pre{{x}:lease"
		{"}x", "", ""},                        // "{}x}:lease": an empty tag is no tag
		{"x", "a{}", ""},                      // "a{}{x}:lease": the prefix's empty braces come first
	}
	for _, tt := range tests {
		for _, mode := range []rueidis.ClientMode{rueidis.ClientModeStandalone, rueidis.ClientModeCluster} {
			l, err := New(noIO{ClientMode: mode}, WithKeyPrefix(tt.prefix))
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.named(tt.name, time.Second)
			if tt.tag == "" {
				var cse *luakit.CrossSlotError
				if !errors.As(err, &cse) || !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "lock: ") {
					t.Errorf("name %q, prefix %q, mode %v: %v, want a CrossSlotError matching ErrInvalidConfig", tt.name, tt.prefix, mode, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("name %q, prefix %q, mode %v: %v", tt.name, tt.prefix, mode, err)
				continue
			}
			wantL, wantF := Keys(tt.name)
			if r.name != tt.name || r.leaseKey != wantL || r.fenceKey != wantF ||
				r.lease() != tt.prefix+wantL || r.fence() != tt.prefix+wantF {
				t.Errorf("name %q, prefix %q: request %+v", tt.name, tt.prefix, r)
			}
			if luakit.HashTag(r.lease()) != tt.tag || luakit.HashTag(r.fence()) != tt.tag {
				t.Errorf("name %q, prefix %q: tags %q, %q; want %q", tt.name, tt.prefix, luakit.HashTag(r.lease()), luakit.HashTag(r.fence()), tt.tag)
			}
			if luakit.Slot(r.lease()) != luakit.Slot(r.fence()) {
				t.Errorf("name %q, prefix %q: slots %d, %d", tt.name, tt.prefix, luakit.Slot(r.lease()), luakit.Slot(r.fence()))
			}
		}
	}
}

// TestNamedValidationBeforeIO: an empty name and a bad TTL fail before any I/O (noIO panics on I/O),
// matching ErrInvalidConfig.
func TestNamedValidationBeforeIO(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		ttl  time.Duration
		want error
	}{
		{"", time.Second, luakit.ErrEmptyKey},
		{"n", 0, ErrInvalidTTL},
		{"n", 999 * time.Microsecond, ErrInvalidTTL},
		{"}n", time.Second, luakit.ErrCrossSlot},
	} {
		if _, err := l.TryAcquire(ctx, tt.name, tt.ttl); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("TryAcquire(%q, %v) = %v, want %v", tt.name, tt.ttl, err, tt.want)
		}
		if _, err := l.Acquire(ctx, tt.name, tt.ttl); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Acquire(%q, %v) = %v, want %v", tt.name, tt.ttl, err, tt.want)
		}
	}
}

// TestStrictSlots: without the option a standalone client takes any two keys (the slot check is the
// Cluster's); with it the two-key form fails before any I/O with the CrossSlotError a Cluster client
// gets, and accepts a tagged pair.
func TestStrictSlots(t *testing.T) {
	ctx := context.Background()
	for _, opts := range [][]Option{nil, {WithStrictSlots(false)}, {WithStrictSlots(true), WithStrictSlots(false)}} {
		loose, err := New(noIO{}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := loose.explicit("a:lease", "b:fence", time.Second); err != nil || r.lease() != "a:lease" {
			t.Fatalf("standalone without WithStrictSlots(true): %+v, %v", r, err)
		}
	}
	strict, err := New(noIO{}, WithStrictSlots(true))
	if err != nil {
		t.Fatal(err)
	}
	var cse *luakit.CrossSlotError
	if _, err := strict.TryAcquireKeys(ctx, "a:lease", "b:fence", time.Second); !errors.As(err, &cse) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("TryAcquireKeys with WithStrictSlots = %v, want a CrossSlotError", err)
	}
	if len(cse.Roles) != 2 || cse.Roles[0] != "lease key" || cse.Roles[1] != "fence key" || cse.Slots[0] != luakit.Slot("a:lease") {
		t.Fatalf("CrossSlotError = %+v", cse)
	}
	if _, err := strict.AcquireKeys(ctx, "a:lease", "b:fence", time.Second); !errors.Is(err, luakit.ErrCrossSlot) {
		t.Fatalf("AcquireKeys with WithStrictSlots = %v, want ErrCrossSlot", err)
	}
	if _, err := strict.explicit("{a}:lease", "{a}:fence", time.Second); err != nil {
		t.Fatalf("a tagged pair with WithStrictSlots: %v", err)
	}
}

func TestCounterError(t *testing.T) {
	for _, r := range []CounterReason{CounterExpiring, CounterNegative, CounterMalformed, CounterOverflow, CounterWrongType, "other"} {
		err := error(&CounterError{Reason: r})
		if !errors.Is(err, ErrCounter) {
			t.Errorf("%s: not ErrCounter", r)
		}
		if !strings.HasPrefix(err.Error(), "coordkit: ") {
			t.Errorf("%s: message %q lacks the shared prefix", r, err.Error())
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
		{ErrInvalidTTL, luakit.ErrInvalidTTL},
		{ErrInvalidConfig, luakit.ErrInvalidConfig},
		{ErrForeignData, luakit.ErrForeignData},
		{ErrNilClient, luakit.ErrNilClient},
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
		{"extend absent", decodeExtend, -1, false, true},
		{"extend other owner", decodeExtend, -2, false, true},
		{"extend busy is unexpected", decodeExtend, 0, false, false},
		{"verify held", decodeVerify, 1, true, true},
		{"verify absent", decodeVerify, -1, false, true},
		{"verify other owner", decodeVerify, -2, false, true},
		{"verify unexpected", decodeVerify, -3, false, false},
		{"release deleted", decodeRelease, 1, true, true},
		{"release absent", decodeRelease, -1, false, true},
		{"release other owner", decodeRelease, -2, false, true},
		{"release busy is unexpected", decodeRelease, 0, false, false},
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

// TestLateGrant: a grant whose reply came after the local estimate elapsed is ErrLateReply, and the
// owner-checked release is sent for it.
func TestLateGrant(t *testing.T) {
	c := &replytest.Client{Err: errors.New("refused")}
	l, err := New(c, WithCleanupTimeout(100*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)), WithConditionalCommands(false))
	if err != nil {
		t.Fatal(err)
	}
	h, err := grant(l, &request{leaseKey: "l", fenceKey: "f", keys: [2]string{"l", "f"}}, "owner", 3, time.Now().Add(-time.Second), 10*time.Millisecond)
	if h != nil || !errors.Is(err, ErrLateReply) {
		t.Fatalf("late grant = %v, %v; want nil, ErrLateReply", h, err)
	}
	cmds := c.Sent()
	if len(cmds) != 1 || !replytest.Runs(cmds[0], releaseScript) || cmds[0][3] != "l" || cmds[0][4] != "owner" {
		t.Fatalf("cleanup sent %q, want one owner-checked release of l", cmds)
	}
}

// TestExtendTTL: a TTL under 1ms is refused before any I/O (PEXPIRE 0 would delete the lease), and a
// TTL is sent in whole milliseconds.
func TestExtendTTL(t *testing.T) {
	c := &replytest.Client{Err: errors.New("refused")}
	l, err := New(c, WithConditionalCommands(false))
	if err != nil {
		t.Fatal(err)
	}
	h, err := grant(l, &request{leaseKey: "l", fenceKey: "f", keys: [2]string{"l", "f"}}, "owner", 3, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background()) //nolint:errcheck // the client refuses: stops the timer only
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		if ok, err := h.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, %v; want ErrInvalidTTL", ttl, ok, err)
		}
	}
	if n := len(c.Sent()); n != 0 {
		t.Fatalf("an invalid TTL sent %d commands", n)
	}
	if ok, err := h.ExtendTTL(context.Background(), 1500*time.Microsecond); ok || err == nil {
		t.Fatalf("ExtendTTL on a refusing client = %v, %v", ok, err)
	}
	cmds := c.Sent()
	if len(cmds) != 1 || !replytest.Runs(cmds[0], extendScript) || cmds[0][5] != "1" {
		t.Fatalf("ExtendTTL(1.5ms) sent %q, want extend with 1 ms", cmds)
	}
	if h.TTL() != time.Minute || h.Err() != nil {
		t.Fatalf("a refused renewal changed the handle: TTL %v, Err %v", h.TTL(), h.Err())
	}
}

// TestConditionalProbeOncePerLocker: with the default options a Locker's first Extend or Release asks
// the server once which conditional commands it has (COMMAND DOCS); a server that answers with an
// error reply (here: every command is refused) leaves the scripts, for every Lease of the Locker, and
// is not asked again. With WithConditionalCommands(false) nothing is probed.
func TestConditionalProbeOncePerLocker(t *testing.T) {
	for _, on := range []bool{true, false} {
		c := &replytest.Client{Err: replytest.Error(t, "ERR refused")}
		l, err := New(c, WithConditionalCommands(on), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			h, err := grant(l, &request{leaseKey: "l", fenceKey: "f", keys: [2]string{"l", "f"}}, "owner", 3, time.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Extend(context.Background()); err == nil {
				t.Fatalf("lease %d: Extend on a refusing server succeeded", i)
			}
			if _, err := h.Release(context.Background()); err == nil {
				t.Fatalf("lease %d: Release on a refusing server succeeded", i)
			}
		}
		var probes, scripts int
		for _, cmd := range c.Sent() {
			switch {
			case cmd[0] == "COMMAND":
				probes++
			case replytest.Runs(cmd, extendScript), replytest.Runs(cmd, releaseScript):
				scripts++
			default:
				t.Fatalf("conditional %v: unexpected command %q", on, cmd)
			}
		}
		if want := map[bool]int{true: 1, false: 0}[on]; probes != want || scripts != 4 {
			t.Fatalf("conditional %v: %d probes and %d scripts, want %d and 4: %q", on, probes, scripts, want, c.Sent())
		}
	}
}

// TestLeaseLocalState covers the handle's local bookkeeping without a server: the estimate, Done on
// expiry, and Extend refusing without I/O once the estimate elapsed.
func TestLeaseLocalState(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := grant(l, &request{leaseKey: "l", fenceKey: "f", keys: [2]string{"l", "f"}}, "owner", 7, time.Now(), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if h.FencingToken() != 7 || h.OwnerToken() != "owner" || h.Name() != "" || h.LeaseKey() != "l" || h.FenceKey() != "f" || h.TTL() != 20*time.Millisecond {
		t.Fatal("accessors disagree with construction")
	}
	r, err := l.named("job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	named, err := grant(l, &r, "owner2", 8, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if named.Name() != "job" || named.LeaseKey() != "{job}:lease" || named.FenceKey() != "{job}:fence" {
		t.Fatalf("named lease: %q, %q, %q", named.Name(), named.LeaseKey(), named.FenceKey())
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

// TestFailedAcquireCleanup: a TryAcquire that failed sends the owner-checked release behind it exactly
// when the script may have run (luakit.MayHaveApplied): no reply, or an error of unknown kind; an error
// reply (NOPERM, a transient one) stopped the script before its first write. Only no reply is
// ErrUncertain.
func TestFailedAcquireCleanup(t *testing.T) {
	for _, fw := range replytest.FailedWrites(t) {
		t.Run(fw.Name, func(t *testing.T) {
			c := &replytest.Client{Err: fw.Err}
			l, err := New(c, WithCleanupTimeout(50*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.TryAcquire(context.Background(), "k", time.Second)
			if !errors.Is(err, fw.Err) || errors.Is(err, ErrUncertain) != luakit.IsUncertain(fw.Err) {
				t.Fatalf("TryAcquire = %v; want %v", err, fw.Err)
			}
			var releases int
			for _, cmd := range c.Sent() {
				if replytest.Runs(cmd, releaseScript) {
					releases++
				}
			}
			if got := releases > 0; got != fw.Applied {
				t.Fatalf("sent %q: cleanup %v, want %v", c.Sent(), got, fw.Applied)
			}
		})
	}
}

// grant starts a Lease of r for owner with token as if the server had granted an acquisition sent at
// start with ttl; ErrLateReply (after the cleanup) when the estimate already elapsed.
func grant(l *Locker, r *request, owner string, token int64, start time.Time, ttl time.Duration) (*Lease, error) {
	r.args[0], r.ms = owner, ttl.Milliseconds()
	r.args[1] = strconv.FormatInt(r.ms, 10)
	h := l.newLease(r)
	h.b.token = token
	if err := h.b.GrantAcquire(context.Background(), start); err != nil {
		return nil, err
	}
	return h, nil
}
