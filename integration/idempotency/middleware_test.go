package idempotency_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
	"github.com/coordkit/coordkit/luakit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// server is an httptest server running handler behind the middleware.
func server(t *testing.T, s *idempotency.Store, handler http.Handler, opts ...idemhttp.Option) *httptest.Server {
	t.Helper()
	mw, err := idemhttp.New(s, append([]idemhttp.Option{idemhttp.WithSharedScope(true), idemhttp.WithLogger(quiet)}, opts...)...)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(mw.Handler(handler))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panics are expected
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// rawServer is an httptest server running h as it is (no middleware added).
func rawServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func send(t *testing.T, srv *httptest.Server, method, path, key, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set(idemhttp.HeaderKey, key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func requireReply(t *testing.T, r reply, status int, replayed bool) {
	t.Helper()
	require.NoError(t, r.err)
	require.Equal(t, status, r.status, "status (body %q)", r.body)
	if replayed {
		require.Equal(t, "true", r.header.Get(idemhttp.HeaderReplayed))
	} else {
		require.Empty(t, r.header.Get(idemhttp.HeaderReplayed))
	}
}

// claimKeys returns every claim hash the middleware wrote under prefix, on every node.
func (e *env) claimKeys(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	for _, n := range e.Nodes {
		m, err := n.Do(ctx(t), "KEYS", prefix+"*")
		if err != nil {
			continue // a replica-less cluster node answers for its own keys only; errors are not expected
		}
		arr, _ := m.AsStrSlice()
		keys = append(keys, arr...)
	}
	return keys
}

// claimKey finds the single claim hash the middleware wrote under prefix.
func (e *env) claimKey(t *testing.T, prefix string) string {
	t.Helper()
	keys := e.claimKeys(t, prefix)
	require.Len(t, keys, 1, "claims under %q", prefix)
	return keys[0]
}

// testMiddleware: each status code of the behaviour table, with real Redis.
func testMiddleware(t *testing.T, e *env) {
	var calls atomic.Int32
	release := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path == "/slow" {
			<-release
		}
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/big":
			w.Write(bytes.Repeat([]byte("x"), 100))
			return
		case "/fail":
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("X-Request-Id", fmt.Sprint(calls.Load()))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":1,"echo":%q}`, body)
	})
	prefix := "mw1:"
	s := e.store(t, idempotency.WithKeyPrefix(prefix))
	srv := server(t, s, handler,
		idemhttp.WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
		idemhttp.WithScope(func(r *http.Request) (string, error) {
			if r.Header.Get("X-Tenant") == "unknown" {
				return "", errors.New("unknown tenant")
			}
			return r.Header.Get("X-Tenant"), nil
		}),
		idemhttp.WithMaxRequestBody(64), idemhttp.WithMaxStoredResponse(50), idemhttp.WithRetention(time.Minute))

	first := send(t, srv, "POST", "/orders", "k1", `{"a":1}`)
	requireReply(t, first, http.StatusCreated, false)
	require.EqualValues(t, 1, calls.Load())
	ck := e.claimKey(t, prefix)
	require.Equal(t, "c", e.hash(t, ck)["s"])

	dup := send(t, srv, "POST", "/orders", `"k1"`, `{"a":1}`) // the sf-string form is the same key
	requireReply(t, dup, http.StatusCreated, true)
	require.Equal(t, first.body, dup.body)
	require.Equal(t, "application/json", dup.header.Get("Content-Type"))
	require.Equal(t, "/orders/1", dup.header.Get("Location"))
	require.Empty(t, dup.header.Get("X-Request-Id"), "headers off the allow-list are not replayed")
	require.EqualValues(t, 1, calls.Load(), "a duplicate never runs the handler")

	requireReply(t, send(t, srv, "POST", "/orders", "k1", `{"a":2}`), http.StatusUnprocessableEntity, false)
	requireReply(t, send(t, srv, "POST", "/orders?x=1", "k1", `{"a":1}`), http.StatusUnprocessableEntity, false)
	requireReply(t, send(t, srv, "POST", "/orders", "", `{"a":1}`), http.StatusBadRequest, false)
	requireReply(t, send(t, srv, "POST", "/orders", "k2", strings.Repeat("y", 65)), http.StatusRequestEntityTooLarge, false)
	require.EqualValues(t, 1, calls.Load())

	// Another tenant, another path or another method with the same key is another request.
	requireReply(t, send(t, srv, "POST", "/orders", "k1", `{"a":1}`, "X-Tenant", "t2"), http.StatusCreated, false)
	requireReply(t, send(t, srv, "PUT", "/orders", "k1", `{"a":1}`), http.StatusCreated, false)
	require.EqualValues(t, 3, calls.Load())
	// A request that cannot be scoped is answered 500 without claiming the key or running the handler.
	claims := len(e.claimKeys(t, prefix))
	unscoped := send(t, srv, "POST", "/orders", "k-unscoped", `{"a":1}`, "X-Tenant", "unknown")
	requireReply(t, unscoped, http.StatusInternalServerError, false)
	require.Equal(t, "application/problem+json", unscoped.header.Get("Content-Type"))
	require.EqualValues(t, 3, calls.Load())
	require.Len(t, e.claimKeys(t, prefix), claims, "no claim was written")
	// An optional key may be missing: the handler runs unprotected each time.
	requireReply(t, send(t, srv, "PUT", "/orders", "", `{}`), http.StatusCreated, false)
	requireReply(t, send(t, srv, "PUT", "/orders", "", `{}`), http.StatusCreated, false)
	require.EqualValues(t, 5, calls.Load())

	// In flight: 409 with Retry-After, then the replay once the original finishes.
	slow := make(chan reply, 1)
	go func() { slow <- send(t, srv, "POST", "/slow", "k3", "") }()
	require.Eventually(t, func() bool { return calls.Load() == 6 }, 10*time.Second, time.Millisecond)
	busy := send(t, srv, "POST", "/slow", "k3", "")
	requireReply(t, busy, http.StatusConflict, false)
	require.Equal(t, "1", busy.header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", busy.header.Get("Content-Type"))
	close(release)
	requireReply(t, <-slow, http.StatusCreated, false)
	requireReply(t, send(t, srv, "POST", "/slow", "k3", ""), http.StatusCreated, true)
	require.EqualValues(t, 6, calls.Load())

	// Server errors are stored and replayed too.
	requireReply(t, send(t, srv, "POST", "/fail", "k4", ""), http.StatusInternalServerError, false)
	r := send(t, srv, "POST", "/fail", "k4", "")
	requireReply(t, r, http.StatusInternalServerError, true)
	require.Equal(t, "boom\n", r.body)
	require.EqualValues(t, 7, calls.Load())

	// Too large to store: served in full, not stored; the claim stays pending, duplicates get 409.
	big := send(t, srv, "POST", "/big", "k5", "")
	requireReply(t, big, http.StatusOK, false)
	require.Len(t, big.body, 100)
	requireReply(t, send(t, srv, "POST", "/big", "k5", ""), http.StatusConflict, false)
	require.EqualValues(t, 8, calls.Load())

	// Foreign data at the claim key (another type written there): 500, the handler does not run and the
	// data is left alone; a retry cannot fix it, so it is not a 503.
	fprefix := "mwforeign:"
	fsrv := server(t, e.store(t, idempotency.WithKeyPrefix(fprefix)), handler)
	requireReply(t, send(t, fsrv, "POST", "/orders", "f1", ""), http.StatusCreated, false)
	fk := e.claimKey(t, fprefix)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(fk).Value("not a claim").Build()).Error())
	before := calls.Load()
	foreign := send(t, fsrv, "POST", "/orders", "f1", "")
	requireReply(t, foreign, http.StatusInternalServerError, false)
	require.Equal(t, "application/problem+json", foreign.header.Get("Content-Type"))
	require.Equal(t, before, calls.Load(), "the handler does not run over foreign data")
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(fk).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "not a claim", v)
}

// testMiddlewarePanics: a panicking handler leaves its claim pending by default (409 for duplicates);
// with WithAbandonOnPanic a handler that wrote nothing has its claim abandoned (a retry runs again),
// but one that wrote a response keeps it pending. The panic reaches net/http in every case.
func testMiddlewarePanics(t *testing.T, e *env) {
	var calls atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.URL.Path == "/wrote" {
			w.WriteHeader(http.StatusAccepted)
			w.(http.Flusher).Flush()
		}
		if r.URL.Query().Get("ok") == "" || n == 1 {
			panic("handler failed")
		}
		w.Write([]byte("recovered"))
	})
	for _, abandon := range []bool{false, true} {
		t.Run(fmt.Sprintf("abandon=%v", abandon), func(t *testing.T) {
			calls.Store(0)
			prefix := fmt.Sprintf("mwpanic:%v:", abandon)
			s := e.store(t, idempotency.WithKeyPrefix(prefix))
			srv := server(t, s, handler, idemhttp.WithAbandonOnPanic(abandon))

			r := send(t, srv, "POST", "/nothing?ok=1", "p1", "")
			require.Error(t, r.err, "net/http aborts the response of a panicking handler")
			second := send(t, srv, "POST", "/nothing?ok=1", "p1", "")
			if abandon {
				requireReply(t, second, http.StatusOK, false)
				require.Equal(t, "recovered", second.body)
				require.EqualValues(t, 2, calls.Load(), "the abandoned claim let the retry run")
			} else {
				requireReply(t, second, http.StatusConflict, false)
				require.EqualValues(t, 1, calls.Load())
				e.requirePending(t, e.claimKey(t, prefix), idemhttp.DefaultClaimLease)
			}

			// A handler that already wrote part of its response may have had a side effect: never abandoned.
			calls.Store(0)
			prefix2 := prefix + "wrote:"
			s2 := e.store(t, idempotency.WithKeyPrefix(prefix2))
			srv2 := server(t, s2, handler, idemhttp.WithAbandonOnPanic(abandon))
			send(t, srv2, "POST", "/wrote", "p2", "")
			requireReply(t, send(t, srv2, "POST", "/wrote", "p2", ""), http.StatusConflict, false)
			require.EqualValues(t, 1, calls.Load())
			e.requirePending(t, e.claimKey(t, prefix2), idemhttp.DefaultClaimLease)
		})
	}
}

// testMiddlewareWaitAndFailures: with WithWait, concurrent duplicates wait for the original and get
// its replay (exactly one execution); a store that fails answers 503, or runs the handler with
// WithFailOpen.
func testMiddlewareWaitAndFailures(t *testing.T, e *env) {
	var calls atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		time.Sleep(100 * time.Millisecond)
		w.Write([]byte("once"))
	})
	srv := server(t, e.trackedStore(t, idempotency.WithKeyPrefix("mwwait:")), handler, idemhttp.WithWait(10*time.Second))
	var wg sync.WaitGroup
	replies := make([]reply, 20)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = send(t, srv, "POST", "/w", "w1", "body")
		}()
	}
	wg.Wait()
	replayed := 0
	for _, r := range replies {
		require.NoError(t, r.err)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "once", r.body)
		if r.header.Get(idemhttp.HeaderReplayed) == "true" {
			replayed++
		}
	}
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, 19, replayed)

	// A store whose client is closed fails every call (an uncertain outcome): fail closed, or open.
	// Guarded: a cluster client closes its connections in goroutines, and rueidis can revive one
	// whose dial was in flight at Close; the guard fails every command after Close at once.
	c := luakit.GuardClose(e.NewClient(t, nil))
	broken, err := idempotency.New(c)
	require.NoError(t, err)
	c.Close()
	closed := server(t, broken, handler)
	r := send(t, closed, "POST", "/w", "f1", "")
	requireReply(t, r, http.StatusServiceUnavailable, false)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	calls.Store(0)
	open := server(t, broken, handler, idemhttp.WithFailOpen(true))
	requireReply(t, send(t, open, "POST", "/w", "f1", ""), http.StatusOK, false)
	require.EqualValues(t, 1, calls.Load())
}
