package idemhttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

func newNoIO(t *testing.T, opts ...Option) *Middleware {
	t.Helper()
	st, err := idempotency.New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(st, append([]Option{WithSharedScope(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNew(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "idemhttp: ") {
		t.Fatalf("New(nil) = %v, want an \"idemhttp: \" error matching luakit.ErrInvalidConfig", err)
	}
	st, _ := idempotency.New(noIO{})
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"required", WithRequired(func(*http.Request) bool { return true }), true},
		{"nil required", WithRequired(nil), true},
		{"scope", WithScope(func(*http.Request) (string, error) { return "t", nil }), true},
		{"nil scope", WithScope(nil), true},
		{"claim lease", WithClaimLease(time.Millisecond), true},
		{"claim lease too short", WithClaimLease(time.Microsecond), false},
		{"retention", WithRetention(time.Millisecond), true},
		{"retention too short", WithRetention(999 * time.Microsecond), false},
		{"store policy", WithStorePolicy(func(*http.Request, int, http.Header) bool { return true }), true},
		{"nil store policy", WithStorePolicy(nil), true},
		{"fingerprint", WithFingerprint(func(*http.Request, []byte) (string, error) { return "", nil }), true},
		{"nil fingerprint", WithFingerprint(nil), true},
		{"max request", WithMaxRequestBody(0), true},
		{"max request negative", WithMaxRequestBody(-1), false},
		{"max response", WithMaxStoredResponse(10), true},
		{"max response negative", WithMaxStoredResponse(-1), false},
		{"replay headers", WithReplayHeaders("x-a"), true},
		{"fail open", WithFailOpen(true), true},
		{"wait", WithWait(time.Second), true},
		{"wait negative", WithWait(-1), false},
		{"abandon on panic", WithAbandonOnPanic(true), true},
		{"store timeout", WithStoreTimeout(time.Second), true},
		{"store timeout zero", WithStoreTimeout(0), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(st, WithSharedScope(true), tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("error = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && (!errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "idemhttp: ")) {
				t.Fatalf("error = %v, want an \"idemhttp: \" error matching luakit.ErrInvalidConfig", err)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	long := strings.Repeat("a", MaxKeyLength)
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`8e03978e-40d5`, "8e03978e-40d5", true},
		{` "a b" `, "a b", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{long, long, true},
		{long + "a", "", false},
		{`""`, "", false},
		{``, "", false},
		{`"abc`, "", false},
		{`"abc"x`, "", false},
		{`"a\nb"`, "", false},
		{"\"a\x01\"", "", false},
		{"a b", "", false},
		{"a\x7f", "", false},
		{`a"b`, "", false},
	}
	for _, tt := range tests {
		got, err := ParseKey(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestRejectedBeforeIO(t *testing.T) {
	handlerRan := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlerRan = true })
	m := newNoIO(t, WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
		WithMaxRequestBody(4))
	tests := []struct {
		name    string
		method  string
		keys    []string
		body    string
		status  int
		handler bool
	}{
		{"missing required", http.MethodPost, nil, "", http.StatusBadRequest, false},
		{"missing optional", http.MethodPut, nil, "", http.StatusOK, true},
		{"repeated", http.MethodPost, []string{"a", "b"}, "", http.StatusBadRequest, false},
		{"malformed", http.MethodPost, []string{`"a`}, "", http.StatusBadRequest, false},
		{"body too large", http.MethodPost, []string{"a"}, "12345", http.StatusRequestEntityTooLarge, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handlerRan = false
			r := httptest.NewRequest(tt.method, "/orders", strings.NewReader(tt.body))
			for _, k := range tt.keys {
				r.Header.Add(HeaderKey, k)
			}
			w := httptest.NewRecorder()
			m.Handler(next).ServeHTTP(w, r)
			if w.Code != tt.status || handlerRan != tt.handler {
				t.Fatalf("status %d handler %v; want %d %v", w.Code, handlerRan, tt.status, tt.handler)
			}
			if tt.status >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("content type %q", w.Header().Get("Content-Type"))
			}
		})
	}
}

// A scope function that fails answers 500 before the store is touched (noIO panics on any command):
// the key is not claimed and the handler does not run, with or without WithFailOpen.
func TestScopeError(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		handlerRan := false
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlerRan = true })
		var logged bytes.Buffer
		m := newNoIO(t, WithFailOpen(failOpen), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))),
			WithScope(func(r *http.Request) (string, error) { return "", errors.New("no tenant") }))
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
		r.Header.Set(HeaderKey, "k")
		w := httptest.NewRecorder()
		m.Handler(next).ServeHTTP(w, r)
		if w.Code != http.StatusInternalServerError || handlerRan {
			t.Fatalf("fail open %v: status %d handler %v; want 500 without the handler", failOpen, w.Code, handlerRan)
		}
		if w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("content type %q", w.Header().Get("Content-Type"))
		}
		if !strings.Contains(logged.String(), "no tenant") {
			t.Errorf("the scope error was not logged: %q", logged.String())
		}
	}
	// A request without a key never asks for its scope.
	m := newNoIO(t, WithScope(func(r *http.Request) (string, error) { return "", errors.New("no tenant") }))
	w := httptest.NewRecorder()
	m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })).
		ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusNoContent {
		t.Fatalf("unkeyed request: status %d, want 204", w.Code)
	}
}

func TestKeysAndFingerprints(t *testing.T) {
	base := ClaimKey("t", "POST", "/a", "k")
	// The key layout operators rely on: a change must be listed in the changelog.
	if want := "idemhttp:" + hexSHA256("\x01t\x04POST\x02/a\x01k"); base != want {
		t.Errorf("ClaimKey = %q, want %q", base, want)
	}
	for _, other := range []string{
		ClaimKey("u", "POST", "/a", "k"), ClaimKey("t", "PUT", "/a", "k"), ClaimKey("t", "POST", "/b", "k"),
		ClaimKey("t", "POST", "/a", "k2"), ClaimKey("tP", "OST", "/a", "k"),
	} {
		if other == base {
			t.Errorf("claim keys collide: %q", other)
		}
	}
	fp := fingerprint("POST", "/a", "", []byte("x"))
	if fp != fingerprint("POST", "/a", "", []byte("x")) {
		t.Error("fingerprint is not deterministic")
	}
	if fp == fingerprint("POST", "/a", "q=1", []byte("x")) || fp == fingerprint("POST", "/a", "", []byte("y")) {
		t.Error("fingerprint ignores query or body")
	}
	d, err := DefaultFingerprint(httptest.NewRequest("POST", "/a", nil), []byte("x"))
	if err != nil || d != fp {
		t.Errorf("DefaultFingerprint = %q, %v; want %q", d, err, fp)
	}
}

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestDefaultStorePolicy(t *testing.T) {
	tests := []struct {
		status int
		store  bool
	}{
		{200, true}, {201, true}, {204, true}, {302, true}, {400, true}, {404, true}, {409, true},
		{422, true}, {429, false}, {500, true}, {502, true}, {503, false}, {504, true},
	}
	for _, tt := range tests {
		if got := DefaultStorePolicy(nil, tt.status, http.Header{}); got != tt.store {
			t.Errorf("DefaultStorePolicy(%d) = %v, want %v", tt.status, got, tt.store)
		}
	}
}

// wrapped is a handler's own ResponseWriter wrapper that exposes Unwrap.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestDoNotStore(t *testing.T) {
	rc := &recorder{w: httptest.NewRecorder()}
	tests := []struct {
		name string
		w    http.ResponseWriter
		ok   bool
	}{
		{"recorder", rc, true},
		{"wrapped recorder", wrapped{wrapped{rc}}, true},
		{"other writer", httptest.NewRecorder(), false},
		{"wrapped other writer", wrapped{httptest.NewRecorder()}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc.noStore = false
			if got := DoNotStore(tt.w); got != tt.ok || rc.noStore != tt.ok {
				t.Fatalf("DoNotStore = %v (marked %v), want %v", got, rc.noStore, tt.ok)
			}
		})
	}
}

// A fingerprint function that fails answers 400 before the store is touched (noIO panics on any
// command): the key is not claimed and the handler does not run.
func TestFingerprintError(t *testing.T) {
	handlerRan := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlerRan = true })
	var seen []byte
	m := newNoIO(t, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithFingerprint(func(r *http.Request, body []byte) (string, error) {
			seen = body
			return "", errors.New("not JSON")
		}))
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{"))
	r.Header.Set(HeaderKey, "k")
	w := httptest.NewRecorder()
	m.Handler(next).ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || handlerRan || string(seen) != "{" {
		t.Fatalf("status %d handler %v body seen %q; want 400 without the handler, body \"{\"", w.Code, handlerRan, seen)
	}
}

func TestRecorder(t *testing.T) {
	w := httptest.NewRecorder()
	rc := &recorder{w: w, max: 5, allow: canonicalSet([]string{"content-type"}), status: http.StatusOK}
	rc.Header().Set("Content-Type", "text/plain")
	rc.Header().Set("Set-Cookie", "s=1")
	rc.WriteHeader(http.StatusCreated)
	rc.Write([]byte("abc"))
	if rc.status != 201 || string(rc.body) != "abc" || rc.overflow || !reflect.DeepEqual(rc.header, http.Header{"Content-Type": {"text/plain"}}) {
		t.Fatalf("recorder = %+v", rc)
	}
	rc.Write([]byte("def"))
	if !rc.overflow || rc.body != nil || w.Body.String() != "abcdef" {
		t.Fatalf("overflow not detected or body not passed through: %+v %q", rc, w.Body.String())
	}
}

func TestRecordRoundTrip(t *testing.T) {
	tests := []record{
		{status: 200, header: http.Header{}, body: []byte{}},
		{status: 201, header: http.Header{"Content-Type": {"application/json"}, "Location": {"/a", "/b"}}, body: []byte(`{"id":1}`)},
		{status: 599, header: http.Header{"X-Bin": {"\x00\xff"}}, body: []byte{0, 1, 2, 255}},
	}
	for _, r := range tests {
		got, err := decodeRecord(r.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.status != r.status || !reflect.DeepEqual(got.header, r.header) || !bytes.Equal(got.body, r.body) {
			t.Errorf("round trip = %+v, want %+v", got, r)
		}
	}
	for _, bad := range [][]byte{nil, {'R'}, {'X', 1, 200, 1, 0}, {'R', 2, 200, 1, 0}, {'R', 1, 99, 0}, {'R', 1, 0xc8, 0x01, 5}} {
		if _, err := decodeRecord(bad); !errors.Is(err, luakit.ErrForeignData) {
			t.Errorf("decodeRecord(%v) = %v, want an error matching luakit.ErrForeignData", bad, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&record{status: 200, header: http.Header{"A": {"b"}}, body: []byte("x")}).encode())
	f.Add([]byte{'R', 1, 0xc8, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if r.status < 100 || r.status > 999 {
			t.Fatalf("status %d accepted", r.status)
		}
		again, err := decodeRecord(r.encode())
		if err != nil || again.status != r.status || !bytes.Equal(again.body, r.body) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

func TestNewRequiresScope(t *testing.T) {
	st, _ := idempotency.New(noIO{})
	scope := WithScope(func(*http.Request) (string, error) { return "t", nil })
	for name, opts := range map[string][]Option{
		"no scope":                         nil,
		"WithSharedScope(false)":           {WithSharedScope(false)},
		"WithSharedScope(true) then false": {WithSharedScope(true), WithSharedScope(false)},
	} {
		if _, err := New(st, opts...); !errors.Is(err, luakit.ErrInvalidConfig) {
			t.Errorf("New with %s = %v, want an error matching luakit.ErrInvalidConfig", name, err)
		}
	}
	for name, opts := range map[string][]Option{
		"WithSharedScope(true)":                {WithSharedScope(true)},
		"WithScope":                            {scope},
		"WithScope and WithSharedScope(false)": {scope, WithSharedScope(false)},
		"WithScope then WithSharedScope(true)": {scope, WithSharedScope(true)},
		"WithSharedScope(true) then WithScope": {WithSharedScope(true), scope},
	} {
		if _, err := New(st, opts...); err != nil {
			t.Errorf("New with %s: %v", name, err)
		}
	}
}
