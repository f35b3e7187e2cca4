package ratelimit

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestCompileValidation(t *testing.T) {
	t.Parallel()
	maxD := time.Duration(math.MaxInt64)
	many := make([]Component, MaxComponents+1)
	for i := range many {
		many[i] = FixedWindow{Limit: 1, Window: time.Second}
	}
	tests := []struct {
		name  string
		p     Policy
		field string // "" when valid
	}{
		{"fixed ok", FixedWindow{Limit: 1, Window: time.Millisecond}, ""},
		{"fixed pointer ok", &FixedWindow{Limit: 5, Window: time.Second}, ""},
		{"fixed max limit", FixedWindow{Limit: MaxLimit, Window: time.Second}, ""},
		{"fixed limit 0", FixedWindow{Limit: 0, Window: time.Second}, "FixedWindow.Limit"},
		{"fixed limit negative", FixedWindow{Limit: -1, Window: time.Second}, "FixedWindow.Limit"},
		{"fixed limit above max", FixedWindow{Limit: MaxLimit + 1, Window: time.Second}, "FixedWindow.Limit"},
		{"fixed window 0", FixedWindow{Limit: 1}, "FixedWindow.Window"},
		{"fixed window negative", FixedWindow{Limit: 1, Window: -time.Second}, "FixedWindow.Window"},
		{"fixed window below 1µs", FixedWindow{Limit: 1, Window: 999 * time.Nanosecond}, "FixedWindow.Window"},
		{"fixed window 1µs", FixedWindow{Limit: 1, Window: time.Microsecond}, ""},
		{"fixed window 0.3ms", FixedWindow{Limit: 1, Window: 300 * time.Microsecond}, ""},
		{"fixed window MaxSpan", FixedWindow{Limit: 1, Window: MaxSpan}, ""},
		{"fixed window above MaxSpan", FixedWindow{Limit: 1, Window: MaxSpan + time.Microsecond}, "FixedWindow.Window"},
		{"fixed window above MaxSpan after rounding", FixedWindow{Limit: 1, Window: MaxSpan + 1}, "FixedWindow.Window"},
		{"fixed window rounds beyond duration", FixedWindow{Limit: 1, Window: maxD}, "FixedWindow.Window"},
		{"nil fixed pointer", (*FixedWindow)(nil), "FixedWindow"},
		{"sliding ok", SlidingWindow{Limit: 10, Window: time.Minute, Segments: 10}, ""},
		{"sliding segments 0 means 10", SlidingWindow{Limit: 10, Window: time.Minute}, ""},
		{"sliding segments 1024", SlidingWindow{Limit: 10, Window: time.Minute, Segments: 1024}, ""},
		{"sliding segments 1025", SlidingWindow{Limit: 10, Window: time.Minute, Segments: 1025}, "SlidingWindow.Segments"},
		{"sliding segments negative", SlidingWindow{Limit: 10, Window: time.Minute, Segments: -1}, "SlidingWindow.Segments"},
		{"sliding limit 0", SlidingWindow{Limit: 0, Window: time.Minute}, "SlidingWindow.Limit"},
		{"sliding window 0", SlidingWindow{Limit: 1}, "SlidingWindow.Window"},
		{"sliding window MaxSpan", SlidingWindow{Limit: 1, Window: MaxSpan}, ""},
		{"sliding window above MaxSpan", SlidingWindow{Limit: 1, Window: MaxSpan + time.Microsecond}, "SlidingWindow.Window"},
		{"sliding window above MaxSpan after rounding", SlidingWindow{Limit: 1, Window: MaxSpan + 1}, "SlidingWindow.Window"},
		{"sliding window 1µs", SlidingWindow{Limit: 1, Window: time.Microsecond, Segments: 1}, ""},
		{"sliding window below 1µs", SlidingWindow{Limit: 1, Window: 1}, "SlidingWindow.Window"},
		{"bucket ok", TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second}, ""},
		{"bucket tokens above limit", TokenBucket{Limit: 10, TokensPerPeriod: 20, Period: time.Second}, ""},
		{"bucket limit 0", TokenBucket{Limit: 0, TokensPerPeriod: 1, Period: time.Second}, "TokenBucket.Limit"},
		{"bucket tokens 0", TokenBucket{Limit: 1, TokensPerPeriod: 0, Period: time.Second}, "TokenBucket.TokensPerPeriod"},
		{"bucket tokens above max", TokenBucket{Limit: 1, TokensPerPeriod: MaxLimit + 1, Period: time.Second}, "TokenBucket.TokensPerPeriod"},
		{"bucket period 0", TokenBucket{Limit: 1, TokensPerPeriod: 1}, "TokenBucket.Period"},
		{"bucket refill fits", TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: MaxSpan / 2}, ""},
		{"bucket refill overflows", TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: MaxSpan / 2}, "TokenBucket.Period"},
		{"bucket period 0.4ms", TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 400 * time.Microsecond}, ""},
		{"bucket period below 1µs", TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 500}, "TokenBucket.Period"},
		{"gcra ok", GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond}, ""},
		{"gcra pointer ok", &GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond}, ""},
		{"nil gcra pointer", (*GCRA)(nil), "policy"},
		{"gcra burst 0", GCRA{Burst: 0, EmissionInterval: time.Millisecond}, "GCRA.Burst"},
		{"gcra interval 0", GCRA{Burst: 1}, "GCRA.EmissionInterval"},
		{"gcra interval below 1µs", GCRA{Burst: 1, EmissionInterval: time.Nanosecond}, "GCRA.EmissionInterval"},
		{"gcra interval 1µs", GCRA{Burst: 1, EmissionInterval: time.Microsecond}, ""},
		{"gcra interval 1.5ms", GCRA{Burst: 10, EmissionInterval: 1500 * time.Microsecond}, ""},
		{"gcra interval 400µs (2500/s)", GCRA{Burst: 10, EmissionInterval: 400 * time.Microsecond}, ""},
		{"gcra refill fits", GCRA{Burst: 1, EmissionInterval: MaxSpan}, ""},
		{"gcra refill overflows", GCRA{Burst: 2, EmissionInterval: MaxSpan/2 + time.Microsecond}, "GCRA.EmissionInterval"},
		{"gcra burst × interval at 2^51 µs", GCRA{Burst: MaxLimit, EmissionInterval: 2 * time.Microsecond}, ""},
		{"gcra burst × interval above 2^51 µs", GCRA{Burst: MaxLimit, EmissionInterval: 3 * time.Microsecond}, "GCRA.EmissionInterval"},
		{"gcra interval above MaxSpan", GCRA{Burst: 1, EmissionInterval: time.Duration(math.MaxInt64)}, "GCRA.EmissionInterval"},
		{"nil policy", nil, "policy"},
		{"composite ok", Composite{Components: []Component{
			TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second},
			SlidingWindow{Limit: 100, Window: time.Minute, Segments: 10},
			&FixedWindow{Limit: 1000, Window: time.Hour},
		}}, ""},
		{"composite empty", Composite{}, "Composite.Components"},
		{"composite 32", Composite{Components: many[:MaxComponents]}, ""},
		{"composite 33", Composite{Components: many}, "Composite.Components"},
		{"composite nil component", Composite{Components: []Component{FixedWindow{Limit: 1, Window: time.Second}, nil}}, "Composite.Components[1]"},
		{"composite nil pointer component", Composite{Components: []Component{(*TokenBucket)(nil)}}, "Composite.Components[0]"},
		{"composite bad component", Composite{Components: []Component{FixedWindow{Limit: 1, Window: time.Second}, SlidingWindow{Limit: 1, Window: time.Second, Segments: 2000}}}, "Composite.Components[1].Segments"},
		{"nil composite pointer", (*Composite)(nil), "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compile(tt.p)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("compile: %v", err)
				}
				if c.capacity() < 1 {
					t.Fatalf("capacity %d", c.capacity())
				}
				return
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("compile error %v, want ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestCompileRoundsUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    Policy
		sig  string
	}{
		{"whole ms unchanged", FixedWindow{Limit: 3, Window: 1500 * time.Millisecond}, "v2|f3/1500000"},
		{"1ns over rounds up to the next µs", FixedWindow{Limit: 3, Window: time.Second + 1}, "v2|f3/1000001"},
		{"1.5ms is exact", FixedWindow{Limit: 3, Window: 1500 * time.Microsecond}, "v2|f3/1500"},
		{"0.3ms is exact", FixedWindow{Limit: 3, Window: 300 * time.Microsecond}, "v2|f3/300"},
		{"sliding segments 0 is 10", SlidingWindow{Limit: 5, Window: time.Second}, "v2|s5/1000000/10"},
		{"sliding window rounds", SlidingWindow{Limit: 5, Window: 999*time.Millisecond + 1, Segments: 3}, "v2|s5/999001/3"},
		{"bucket period rounds", TokenBucket{Limit: 4, TokensPerPeriod: 2, Period: 250*time.Millisecond + 999999}, "v2|t4/2/251000"},
		{"gcra interval rounds", GCRA{Burst: 7, EmissionInterval: 100*time.Millisecond + 1}, "g7/100001"},
		{"gcra 1.5ms", GCRA{Burst: 7, EmissionInterval: 1500 * time.Microsecond}, "g7/1500"},
		{"gcra 2500/s", GCRA{Burst: 7, EmissionInterval: time.Second / 2500}, "g7/400"},
		{"gcra 1/3 s rounds up", GCRA{Burst: 7, EmissionInterval: time.Second / 3}, "g7/333334"},
		{"largest", FixedWindow{Limit: 1, Window: MaxSpan}, "v2|f1/2251799813685248"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compile(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if c.sig != tt.sig {
				t.Fatalf("signature %q, want %q", c.sig, tt.sig)
			}
		})
	}
}

func TestSlidingSegmentWidth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		window   time.Duration
		segments int
		width    int64
	}{
		{time.Second, 10, 100000},
		{time.Second, 3, 333334},
		{time.Second, 1, 1000000},
		{5 * time.Millisecond, 10, 500},
		{time.Minute, 1024, 58594},
		{1500 * time.Microsecond, 4, 375},
	}
	for _, tt := range tests {
		c, err := compile(SlidingWindow{Limit: 1, Window: tt.window, Segments: tt.segments})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.comps[0].width; got != tt.width {
			t.Errorf("window %v / %d segments: width %d µs, want %d", tt.window, tt.segments, got, tt.width)
		}
		if got := c.block[len(c.block)-1]; got != strconv.FormatInt(tt.width, 10) {
			t.Errorf("script argument width %q, want %d", got, tt.width)
		}
	}
}

func TestCompositeSignatureAndArgs(t *testing.T) {
	t.Parallel()
	p := Composite{Components: []Component{
		TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second},
		SlidingWindow{Limit: 100, Window: time.Minute, Segments: 10},
		FixedWindow{Limit: 1000, Window: time.Hour},
	}}
	c, err := compile(p)
	if err != nil {
		t.Fatal(err)
	}
	const sig = "v2|t10/2/1000000|s100/60000000/10|f1000/3600000000"
	if c.sig != sig {
		t.Fatalf("signature %q, want %q", c.sig, sig)
	}
	want := []string{"d", "1", "cp", sig, "3", "t", "10", "2", "1000000", "s", "100", "60000000", "6000000", "f", "1000", "3600000000", "0"}
	if strings.Join(c.argsOne, ",") != strings.Join(want, ",") {
		t.Fatalf("args %q, want %q", c.argsOne, want)
	}
	if c.argsProbe[1] != "0" || c.decideArgs("7")[1] != "7" {
		t.Fatalf("probe args %q", c.argsProbe)
	}
	if c.capacity() != 10 || c.capIdx != 0 {
		t.Fatalf("capacity %d at %d, want 10 at 0", c.capacity(), c.capIdx)
	}
	// Reordering the components changes the signature.
	r, err := compile(Composite{Components: []Component{p.Components[1], p.Components[0], p.Components[2]}})
	if err != nil {
		t.Fatal(err)
	}
	if r.sig == c.sig || r.equal(c) {
		t.Fatal("reordered composite has the same signature")
	}
	// Standalone layouts store no signature.
	f, err := compile(FixedWindow{Limit: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f.block[0] != "fw" || f.block[1] != "" {
		t.Fatalf("standalone block %q", f.block)
	}
}

func TestEqualAndCompatible(t *testing.T) {
	t.Parallel()
	mustCompile := func(p Policy) *compiled {
		t.Helper()
		c, err := compile(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	fw := mustCompile(FixedWindow{Limit: 5, Window: time.Second})
	if !fw.equal(mustCompile(FixedWindow{Limit: 5, Window: time.Second - time.Microsecond + 1})) {
		t.Fatal("settings equal after rounding are not equal")
	}
	if fw.equal(mustCompile(FixedWindow{Limit: 5, Window: time.Second - time.Microsecond})) {
		t.Fatal("settings 1µs apart are equal")
	}
	if fw.equal(mustCompile(FixedWindow{Limit: 6, Window: time.Second})) {
		t.Fatal("different limits are equal")
	}
	if fw.equal(mustCompile(Composite{Components: []Component{FixedWindow{Limit: 5, Window: time.Second}}})) {
		t.Fatal("a standalone fixed window equals a composite of one")
	}
	comp := func(cs ...Component) *compiled { return mustCompile(Composite{Components: cs}) }
	a := comp(FixedWindow{Limit: 5, Window: time.Second}, TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: time.Second})
	tests := []struct {
		name string
		from *compiled
		to   *compiled
		ok   bool
	}{
		{"fixed to fixed", fw, mustCompile(FixedWindow{Limit: 9, Window: time.Minute}), true},
		{"fixed to sliding", fw, mustCompile(SlidingWindow{Limit: 9, Window: time.Minute}), false},
		{"gcra to gcra", mustCompile(GCRA{Burst: 1, EmissionInterval: time.Second}), mustCompile(GCRA{Burst: 2, EmissionInterval: time.Millisecond}), true},
		{"gcra to bucket", mustCompile(GCRA{Burst: 1, EmissionInterval: time.Second}), mustCompile(TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: time.Second}), false},
		{"composite same kinds", a, comp(FixedWindow{Limit: 50, Window: time.Hour}, TokenBucket{Limit: 3, TokensPerPeriod: 3, Period: time.Millisecond}), true},
		{"composite kind changed", a, comp(SlidingWindow{Limit: 50, Window: time.Hour}, TokenBucket{Limit: 3, TokensPerPeriod: 3, Period: time.Millisecond}), false},
		{"composite count changed", a, comp(FixedWindow{Limit: 5, Window: time.Second}), false},
		{"standalone to composite", fw, comp(FixedWindow{Limit: 5, Window: time.Second}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.from.compatible(tt.to)
			if tt.ok != (err == nil) {
				t.Fatalf("compatible: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidUpdate) {
				t.Fatalf("error %v does not wrap ErrInvalidUpdate", err)
			}
			if err != nil {
				// migrate checks compatibility before any I/O (a nil client would panic otherwise).
				if merr := tt.from.migrate(context.Background(), nil, "k", tt.to); !errors.Is(merr, ErrInvalidUpdate) {
					t.Fatalf("migrate: %v", merr)
				}
			}
		})
	}
	// An identical update is a no-op without I/O.
	if err := fw.migrate(context.Background(), nil, "k", mustCompile(FixedWindow{Limit: 5, Window: time.Second})); err != nil {
		t.Fatalf("identical migrate: %v", err)
	}
}

func TestDecideLocal(t *testing.T) {
	t.Parallel()
	c, err := compile(Composite{Components: []Component{
		FixedWindow{Limit: 9, Window: time.Second},
		TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Neither case does I/O: the nil client would panic.
	d, err := c.decide(context.Background(), nil, "k", 5)
	if err != nil {
		t.Fatal(err)
	}
	want := decision{limit: 4, component: 1}
	if d != want {
		t.Fatalf("n above capacity: %+v, want %+v", d, want)
	}
	if _, err := c.decide(context.Background(), nil, "k", -1); !errors.Is(err, ErrNegativePermits) {
		t.Fatalf("negative n: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.decide(ctx, nil, "k", 1); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUncertain) {
		t.Fatalf("cancelled before sending: %v", err)
	}
}

func TestDecodeReply(t *testing.T) {
	t.Parallel()
	comp, err := compile(Composite{Components: []Component{
		FixedWindow{Limit: 9, Window: time.Second},
		TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gcra, err := compile(GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const now = 1796069434113456
	tests := []struct {
		name string
		c    *compiled
		v    [replyLen]int64
		want decision
		bad  bool
	}{
		{"allowed", comp, [replyLen]int64{1, 3, 0, 2000000, 1, now}, decision{allowed: true, remaining: 3, limit: 4, reset: 2 * time.Second, component: 1, at: time.UnixMicro(now)}, false},
		{"rejected", comp, [replyLen]int64{0, 0, 250001, 900, 0, now}, decision{remaining: 0, limit: 9, retryAfter: 250001 * time.Microsecond, reset: 900 * time.Microsecond, at: time.UnixMicro(now)}, false},
		{"gcra", gcra, [replyLen]int64{1, 19, 0, 1500, 0, now}, decision{allowed: true, remaining: 19, limit: 20, reset: 1500 * time.Microsecond, at: time.UnixMicro(now)}, false},
		{"absent probe", gcra, [replyLen]int64{-1, 20, 0, 0, 0, now}, decision{allowed: true, absent: true, remaining: 20, limit: 20, at: time.UnixMicro(now)}, false},
		{"allowed 2", comp, [replyLen]int64{2, 3, 0, 0, 0, now}, decision{}, true},
		{"status -2", comp, [replyLen]int64{-2, 3, 0, 0, 0, now}, decision{}, true},
		{"retry when absent", gcra, [replyLen]int64{-1, 1, 5, 0, 0, now}, decision{}, true},
		{"negative remaining", comp, [replyLen]int64{1, -1, 0, 0, 0, now}, decision{}, true},
		{"retry when allowed", comp, [replyLen]int64{1, 1, 5, 0, 0, now}, decision{}, true},
		{"negative retry", comp, [replyLen]int64{0, 1, -5, 0, 0, now}, decision{}, true},
		{"negative reset", comp, [replyLen]int64{0, 1, 5, -1, 0, now}, decision{}, true},
		{"component out of range", comp, [replyLen]int64{0, 1, 5, 1, 2, now}, decision{}, true},
		{"gcra component 1", gcra, [replyLen]int64{0, 1, 5, 1, 1, now}, decision{}, true},
		{"no server time", comp, [replyLen]int64{0, 1, 5, 1, 0, 0}, decision{}, true},
		{"retry beyond range", comp, [replyLen]int64{0, 1, maxReply + 1, 1, 0, now}, decision{}, true},
		{"reset beyond range", comp, [replyLen]int64{0, 1, 1, maxReply + 1, 0, now}, decision{}, true},
		{"server time beyond 2^53", comp, [replyLen]int64{0, 1, 1, 1, 0, maxReply + 1}, decision{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.c.decodeReply(tt.v)
			if tt.bad {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d != tt.want {
				t.Fatalf("decoded %+v, want %+v", d, tt.want)
			}
		})
	}
}

func TestEngineErrorMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want error
		not  error
	}{
		{"deadline", context.DeadlineExceeded, ErrUncertain, nil},
		{"canceled", context.Canceled, ErrUncertain, nil},
		{"unknown", errors.New("boom"), ErrUncertain, nil},
		// The scripts' own code for a key of another type or layout, and the server's WRONGTYPE.
		{"foreign layout", replytest.Error(t, "RLFOREIGN ratelimit key holds another limiter layout"), ErrForeignData, ErrUncertain},
		{"server wrong type", replytest.Error(t, "WRONGTYPE Operation against a key holding the wrong kind of value"), ErrForeignData, ErrUncertain},
		{"mismatch", replytest.Error(t, "RLMISMATCH ratelimit stored composite configuration differs"), ErrConfigMismatch, ErrForeignData},
		{"debt", replytest.Error(t, "RLDEBT ratelimit migrated GCRA debt out of range"), ErrDebtOverflow, ErrForeignData},
		{"other reply", replytest.Error(t, "NOPERM no permissions"), errNoSentinel, ErrForeignData},
		{"no slot", rueidis.ErrNoSlot, errNoSentinel, ErrUncertain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := engineError(tt.err)
			if (tt.want != errNoSentinel && !errors.Is(got, tt.want)) || !errors.Is(got, tt.err) {
				t.Fatalf("engineError(%v) = %v, want it to wrap %v and the cause", tt.err, got, tt.want)
			}
			if tt.not != nil && errors.Is(got, tt.not) {
				t.Fatalf("engineError(%v) = %v, must not match %v", tt.err, got, tt.not)
			}
			if !strings.HasPrefix(got.Error(), "ratelimit: ") {
				t.Fatalf("engineError(%v) = %q, want the ratelimit: prefix", tt.err, got)
			}
		})
	}
}

// errNoSentinel in TestEngineErrorMapping's want column: no sentinel, only the cause.
var errNoSentinel = errors.New("no sentinel")

// The scripts signal a key of another type or layout with their own error code, never with a forged
// server reply such as WRONGTYPE.
func TestScriptsDoNotForgeServerErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []*luakit.Script{componentsScript, gcraScript, resetRefundScript} {
		if strings.Contains(s.Source(), "error_reply('WRONGTYPE") {
			t.Errorf("%s forges a WRONGTYPE reply", s.Name())
		}
	}
}

// TestSlidingDefaultSegments: Segments 0 means DefaultSegments (10), so the segment width, the
// lateness bound, is a tenth of the window (rounded up to whole µs).
func TestSlidingDefaultSegments(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		width  int64
	}{
		{10 * time.Second, 1000000},
		{time.Minute, 6000000},
		{15 * time.Millisecond, 1500},
		{time.Millisecond, 100},
		{5 * time.Microsecond, 1},
	} {
		c, err := compile(SlidingWindow{Limit: 3, Window: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.comps[0]; got.segments != DefaultSegments || got.width != tc.width {
			t.Fatalf("window %v: segments %d width %d, want %d and %d", tc.window, got.segments, got.width, DefaultSegments, tc.width)
		}
	}
}
