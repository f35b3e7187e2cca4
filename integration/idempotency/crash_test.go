package idempotency_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
)

// Environment of the crash helper process (TestCrashedOwnerHelper).
const (
	helperAddrs  = "COORDKIT_IDEM_HELPER_ADDRS"  // comma-separated server addresses
	helperPrefix = "COORDKIT_IDEM_HELPER_PREFIX" // the Store's key prefix
	helperLease  = "COORDKIT_IDEM_HELPER_LEASE"  // the claim lease (time.ParseDuration)
)

// TestCrashedOwnerHelper is not a test: testCrashedOwner runs this test binary again with only this
// function selected and the helper variables set. It serves idemhttp over the target and prints
// "URL <url>", then "RUNNING" when its handler starts; the handler never returns. The parent kills
// the process with SIGKILL while the handler runs, as a crashed instance.
func TestCrashedOwnerHelper(t *testing.T) {
	addrs := os.Getenv(helperAddrs)
	if addrs == "" {
		return // the helper process of scenario 19_crashed_owner_frees_after_lease: runs only when started by it
	}
	lease, err := time.ParseDuration(os.Getenv(helperLease))
	require.NoError(t, err)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: strings.Split(addrs, ",")})
	require.NoError(t, err)
	s, err := idempotency.New(c, idempotency.WithKeyPrefix(os.Getenv(helperPrefix)))
	require.NoError(t, err)
	mw, err := idemhttp.New(s, idemhttp.WithSharedScope(true), idemhttp.WithClaimLease(lease), idemhttp.WithLogger(quiet))
	require.NoError(t, err)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		os.Stdout.WriteString("RUNNING\n")
		select {} // a handler still working when the instance dies
	})))
	os.Stdout.WriteString("URL " + srv.URL + "\n")
	select {}
}

// testCrashedOwner: an instance is killed (SIGKILL, a real process) while its handler runs. Its claim
// is kept alive until the kill, then frees the key after the claim lease, never the 24h retention: the
// retry runs the handler once and its response is then replayed.
func testCrashedOwner(t *testing.T, e *env) {
	const lease = time.Second
	prefix := "crash:" + e.Name + ":"
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestCrashedOwnerHelper$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), helperAddrs+"="+strings.Join(e.ClientOption().InitAddress, ","),
		helperPrefix+"="+prefix, helperLease+"="+lease.String())
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
		close(exited)
	}()
	next := func(want string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the helper process exited before printing %q", want)
				if strings.HasPrefix(l, want) {
					return strings.TrimSpace(strings.TrimPrefix(l, want))
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the helper process did not print %q", want)
			}
		}
	}
	url := next("URL")

	// The original request: its client sees the connection break when the process dies.
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{"amount":1}`))
		req.Header.Set(idemhttp.HeaderKey, "crash-1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	next("RUNNING")
	key := prefix + idemhttp.ClaimKey("", http.MethodPost, "/orders", "crash-1")
	e.requirePending(t, key, lease)

	// Another instance (this process) over the same store: 409 while the helper keeps its claim alive,
	// past several leases.
	var calls atomic.Int32
	s := e.store(t, idempotency.WithKeyPrefix(prefix))
	srv := server(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("created"))
	}), idemhttp.WithClaimLease(lease))
	pinned := time.Now().Add(3 * lease)
	for time.Now().Before(pinned) {
		requireReply(t, send(t, srv, "POST", "/orders", "crash-1", `{"amount":1}`), http.StatusConflict, false)
		time.Sleep(50 * time.Millisecond)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	// The dead owner's claim is bounded by the lease, not the retention.
	if p := e.PTTL(t, key); p != -2 {
		require.LessOrEqual(t, p, lease.Milliseconds(), "the crashed owner's claim expires after the lease")
	}
	e.waitGone(t, key)
	requireReply(t, send(t, srv, "POST", "/orders", "crash-1", `{"amount":1}`), http.StatusCreated, false)
	r := send(t, srv, "POST", "/orders", "crash-1", `{"amount":1}`)
	requireReply(t, r, http.StatusCreated, true)
	require.Equal(t, "created", r.body)
	require.EqualValues(t, 1, calls.Load())
	in, err := s.Inspect(ctx(t), idemhttp.ClaimKey("", http.MethodPost, "/orders", "crash-1"))
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, in.State)
	require.Equal(t, idemhttp.DefaultRetention, in.TTL)
}
