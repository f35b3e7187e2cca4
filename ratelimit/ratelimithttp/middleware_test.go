package ratelimithttp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit/replytest"
	"github.com/coordkit/coordkit/ratelimit"
)

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

func newKeyed(t *testing.T, p ratelimit.Policy) *ratelimit.Keyed {
	t.Helper()
	k, err := ratelimit.NewKeyed(noIO{}, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestPolicyField(t *testing.T) {
	tests := []struct {
		name   string
		limit  int64
		window time.Duration
		want   string
	}{
		{"default", 100, time.Minute, `"default";q=100;w=60`},
		{"api", 20, 1500 * time.Millisecond, `"api";q=20;w=2`},
		{"tiny", 1, time.Millisecond, `"tiny";q=1;w=1`},
		{"zero window", 1, 0, `"zero window";q=1;w=1`},
		{`q"uo\te`, 5, time.Second, `"q\"uo\\te";q=5;w=1`},
		{"huge", ratelimit.MaxLimit, time.Second, `"huge";q=999999999999999;w=1`},
		{"negative", -3, time.Second + 1, `"negative";q=0;w=2`},
	}
	for _, tt := range tests {
		if got, err := PolicyField(tt.name, tt.limit, tt.window); err != nil || got != tt.want {
			t.Errorf("PolicyField(%q, %d, %v) = %s, want %s", tt.name, tt.limit, tt.window, got, tt.want)
		}
	}
}

func TestLimitField(t *testing.T) {
	tests := []struct {
		remaining int64
		reset     time.Duration
		want      string
	}{
		{0, 30 * time.Second, `"p";r=0;t=30`},
		{7, 29*time.Second + time.Millisecond, `"p";r=7;t=30`},
		{5, 0, `"p";r=5;t=0`},
		{5, time.Nanosecond, `"p";r=5;t=1`},
		{-1, -time.Second, `"p";r=0;t=0`},
	}
	for _, tt := range tests {
		if got, err := LimitField("p", tt.remaining, tt.reset); err != nil || got != tt.want {
			t.Errorf("LimitField(p, %d, %v) = %s, want %s", tt.remaining, tt.reset, got, tt.want)
		}
	}
}

func TestQuota(t *testing.T) {
	tests := []struct {
		p      ratelimit.Policy
		limit  int64
		window time.Duration
	}{
		{ratelimit.FixedWindow{Limit: 100, Window: time.Minute}, 100, time.Minute},
		// Exact below 1ms: the limiter enforces (and its Policy reports) whole microseconds.
		{ratelimit.SlidingWindow{Limit: 10, Window: 1500 * time.Microsecond, Segments: 3}, 10, 1500 * time.Microsecond},
		// ceil(10/3) = 4 periods of 1s.
		{ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 3, Period: time.Second}, 10, 4 * time.Second},
		{ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 10, Period: 500 * time.Millisecond}, 10, 500 * time.Millisecond},
		// 20 × 1.5ms, exact (it was rounded up to 2ms before the product).
		{ratelimit.GCRA{Burst: 20, EmissionInterval: 1500 * time.Microsecond}, 20, 30 * time.Millisecond},
		{ratelimit.GCRA{Burst: 700, EmissionInterval: 1500 * time.Microsecond}, 700, 1050 * time.Millisecond},
		{ratelimit.GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond}, 20, 2 * time.Second},
	}
	for _, tt := range tests {
		limit, window := quota(tt.p)
		if limit != tt.limit || window != tt.window {
			t.Errorf("quota(%#v) = %d, %v; want %d, %v", tt.p, limit, window, tt.limit, tt.window)
		}
	}
}

func TestRemoteIP(t *testing.T) {
	tests := []struct {
		addr, want string
		err        bool
	}{
		{"192.0.2.1:1234", "192.0.2.1", false},
		{"[2001:db8::1]:443", "2001:db8::1", false},
		{"@unix", "@unix", false},
		{"", "", true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.addr
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		got, err := RemoteIP(r)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("RemoteIP(%q) = %q, %v; want %q, error %v", tt.addr, got, err, tt.want, tt.err)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v, want an error matching ErrInvalidConfig", err)
	}
	single := newKeyed(t, ratelimit.FixedWindow{Limit: 10, Window: time.Second})
	composite := newKeyed(t, ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 10, Window: time.Second},
		ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
	}})
	tests := []struct {
		name string
		k    *ratelimit.Keyed
		opt  Option
		ok   bool
	}{
		{"key", single, WithKey(func(*http.Request) (string, error) { return "k", nil }), true},
		{"nil key", single, WithKey(nil), true},
		{"cost", single, WithCost(func(*http.Request) int64 { return 2 }), true},
		{"nil cost", single, WithCost(nil), true},
		{"one name", single, WithPolicyNames("api"), true},
		{"two names for a standalone policy", single, WithPolicyNames("a", "b"), false},
		{"no names", single, WithPolicyNames(), false},
		{"empty name", single, WithPolicyNames(""), false},
		{"name with a control byte", single, WithPolicyNames("a\nb"), false},
		{"name with a non-ASCII byte", single, WithPolicyNames("café"), false},
		{"name too long", single, WithPolicyNames(string(make([]byte, MaxPolicyNameLength+1))), false},
		{"component names", composite, WithPolicyNames("burst", "steady"), true},
		{"one name for two components", composite, WithPolicyNames("burst"), false},
		{"timeout", single, WithTimeout(time.Second), true},
		{"no timeout", single, WithTimeout(0), true},
		{"negative timeout", single, WithTimeout(-1), false},
		{"fail open", single, WithFailOpen(true), true},
		{"rejected", single, WithRejected(WriteTooManyRequests), true},
		{"nil rejected", single, WithRejected(nil), true},
		{"logger", single, WithLogger(slog.Default()), true},
		{"nil logger", single, WithLogger(nil), true},
		{"nil option", single, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.k, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("error = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "ratelimithttp: ")) {
				t.Fatalf("error = %v, want a ratelimithttp: error matching ErrInvalidConfig", err)
			}
		})
	}
}

func TestDefaultNames(t *testing.T) {
	composite := newKeyed(t, ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 10, Window: time.Second},
		ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.SlidingWindow{Limit: 1000, Window: time.Hour, Segments: 60},
	}})
	m, err := New(composite)
	if err != nil {
		t.Fatal(err)
	}
	name, limit, window := m.describe(ratelimit.Result{Component: 2, Limit: 1000})
	if name != "default.2" || limit != 1000 || window != time.Hour {
		t.Fatalf("describe = %q, %d, %v", name, limit, window)
	}
	single, err := New(newKeyed(t, ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	name, limit, window = single.describe(ratelimit.Result{})
	if name != DefaultPolicyName || limit != 5 || window != 5*time.Second {
		t.Fatalf("describe = %q, %d, %v", name, limit, window)
	}
}

// Requests answered before any decision, or decided without the server, never touch the client.
func TestServeWithoutServer(t *testing.T) {
	k := newKeyed(t, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	tests := []struct {
		name       string
		opts       []Option
		status     int
		policy     string // RateLimit-Policy, "" for none
		retryAfter bool
	}{
		{"negative cost", []Option{WithCost(func(*http.Request) int64 { return -1 })}, http.StatusInternalServerError, "", false},
		{"key error", []Option{WithKey(func(*http.Request) (string, error) { return "", errors.New("no tenant") })}, http.StatusInternalServerError, "", false},
		{"empty key", []Option{WithKey(func(*http.Request) (string, error) { return "", nil })}, http.StatusInternalServerError, "", false},
		{"cost above capacity", []Option{WithCost(func(*http.Request) int64 { return 11 }), WithPolicyNames("api")}, http.StatusTooManyRequests, `"api";q=10;w=60`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(k, append(tt.opts, WithLogger(quiet))...)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if ran {
				t.Error("handler ran")
			}
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get(HeaderRateLimitPolicy); got != tt.policy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tt.policy)
			}
			if got := rec.Header().Get(HeaderRateLimit); got != "" {
				t.Errorf("RateLimit = %q, want none", got)
			}
			if got := rec.Header().Get(HeaderRetryAfter); (got != "") != tt.retryAfter {
				t.Errorf("Retry-After = %q, want present=%v", got, tt.retryAfter)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestFieldsRejectControlBytes(t *testing.T) {
	for _, name := range []string{"", "a\r\nSet-Cookie: x", "a\nb", "a\rb", "tab\t"} {
		if v, err := PolicyField(name, 1, time.Second); err == nil || v != "" || !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("PolicyField(%q) = %q, %v", name, v, err)
		}
		if v, err := LimitField(name, 1, time.Second); err == nil || v != "" || !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("LimitField(%q) = %q, %v", name, v, err)
		}
	}
}

// TestNilArgumentMeansDefault: an option given nil leaves the default in place, exactly as if it
// had been omitted.
func TestNilArgumentMeansDefault(t *testing.T) {
	fn := func(f any) uintptr { return reflect.ValueOf(f).Pointer() }
	def := defaultConfig()
	for name, opt := range map[string]Option{
		"WithKey":           WithKey(nil),
		"WithCost":          WithCost(nil),
		"WithRejected":      WithRejected(nil),
		"WithLogger":        WithLogger(nil),
		"WithMeterProvider": WithMeterProvider(nil),
	} {
		c := defaultConfig()
		c.key, c.cost, c.rejected, c.logger = nil, nil, nil, nil
		if err := opt.apply(&c); err != nil {
			t.Fatalf("%s(nil): %v", name, err)
		}
		switch name {
		case "WithKey":
			if c.key == nil || fn(c.key) != fn(def.key) {
				t.Errorf("WithKey(nil) did not set RemoteIP")
			}
		case "WithCost":
			if c.cost == nil || c.cost(nil) != 1 {
				t.Errorf("WithCost(nil) did not set a cost of 1")
			}
		case "WithRejected":
			if c.rejected == nil || fn(c.rejected) != fn(def.rejected) {
				t.Errorf("WithRejected(nil) did not set WriteTooManyRequests")
			}
		case "WithLogger":
			if c.logger != slog.Default() {
				t.Errorf("WithLogger(nil) did not set slog.Default()")
			}
		case "WithMeterProvider":
			if c.meterProvider != nil {
				t.Errorf("WithMeterProvider(nil) set a provider; nil means the global one")
			}
		}
	}
}
