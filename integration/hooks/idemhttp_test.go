package hooks_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
	"github.com/coordkit/coordkit/luakit"
)

// testIdemhttpOutcomes counts started, replayed, mismatch and in_progress requests on a real store.
func testIdemhttpOutcomes(t *testing.T, e *env) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	st, err := idempotency.New(e.client(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idemhttp.New(st, idemhttp.WithSharedScope(true), idemhttp.WithMeterProvider(mp), idemhttp.WithInstance("orders"))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(idemhttp.HeaderKey) == "slow" {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	do := func(key, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		r.Header.Set(idemhttp.HeaderKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := do("k1", "a"); c != http.StatusCreated {
		t.Fatalf("first = %d", c)
	}
	if c := do("k1", "a"); c != http.StatusCreated {
		t.Fatalf("replay = %d", c)
	}
	if c := do("k1", "b"); c != http.StatusUnprocessableEntity {
		t.Fatalf("mismatch = %d", c)
	}
	done := make(chan int, 1)
	go func() { done <- do("slow", "a") }()
	<-entered
	if c := do("slow", "a"); c != http.StatusConflict {
		t.Fatalf("in progress = %d", c)
	}
	close(release)
	if c := <-done; c != http.StatusCreated {
		t.Fatalf("slow = %d", c)
	}
	want := map[string]int64{"started@orders": 2, "replayed@orders": 1, "mismatch@orders": 1, "in_progress@orders": 1}
	equalCounts(t, "outcomes", counts(t, reader, idemhttp.MetricOutcomes, "outcome", idemhttp.AttrInstance), want)
}

// testIdemhttpStoreDown counts a request the store could not serve as unavailable (503), and as
// failed_open when the middleware fails open and runs the handler unprotected, on a store whose
// client is closed.
func testIdemhttpStoreDown(t *testing.T, e *env) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	// Guarded: every command after Close fails at once (rueidis can revive a connection whose dial
	// was in flight at Close).
	c := luakit.GuardClose(e.client(t))
	st, err := idempotency.New(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ran := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran++; w.WriteHeader(http.StatusCreated) })
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		failOpen bool
		code     int
	}{{false, http.StatusServiceUnavailable}, {true, http.StatusCreated}} {
		m, err := idemhttp.New(st, idemhttp.WithSharedScope(true), idemhttp.WithMeterProvider(mp), idemhttp.WithInstance("orders"),
			idemhttp.WithFailOpen(tc.failOpen), idemhttp.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("a"))
		r.Header.Set(idemhttp.HeaderKey, "down-1")
		w := httptest.NewRecorder()
		m.Handler(next).ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Fatalf("fail open %v: status %d, want %d", tc.failOpen, w.Code, tc.code)
		}
	}
	if ran != 1 {
		t.Fatalf("the handler ran %d times, want once (failed open)", ran)
	}
	want := map[string]int64{"unavailable@orders": 1, "failed_open@orders": 1}
	equalCounts(t, "outcomes", counts(t, reader, idemhttp.MetricOutcomes, "outcome", idemhttp.AttrInstance), want)
}
