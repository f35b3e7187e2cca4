package testkit

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
)

// shortTempDir returns a temporary directory with a path short enough for a unix socket.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ck")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// noSockets points the socket candidates at paths that do not exist and unsets DOCKER_HOST.
func noSockets(t *testing.T) []string {
	t.Helper()
	t.Setenv(EnvDockerHost, "")
	d := shortTempDir(t)
	paths := []string{filepath.Join(d, "docker.sock"), filepath.Join(d, "rootless.sock")}
	old := dockerSocketCandidates
	dockerSocketCandidates = func() []string { return paths }
	t.Cleanup(func() { dockerSocketCandidates = old })
	return paths
}

// fakeEngine is a Docker engine API on a unix socket that answers what testkit's image step asks:
// ping, image inspect (404 unless built), pull (fails: no registry) and build (records the context).
type fakeEngine struct {
	sock string
	srv  *http.Server

	mu       sync.Mutex
	pulls    []string
	builds   []string // tags
	contexts [][]byte
}

var apiPrefix = regexp.MustCompile(`^/v[0-9.]+`)

func newFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	f := &fakeEngine{sock: filepath.Join(shortTempDir(t), "docker.sock")}
	l, err := net.Listen("unix", f.sock)
	require.NoError(t, err)
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = f.srv.Serve(l) }()
	t.Cleanup(func() { _ = f.srv.Close(); <-done })
	return f
}

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Api-Version", "1.47")
	p := apiPrefix.ReplaceAllString(r.URL.Path, "")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case p == "/_ping":
		_, _ = io.WriteString(w, "OK")
	case strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
		name := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
		for _, b := range f.builds {
			if b == name {
				_, _ = fmt.Fprintf(w, `{"Id":"sha256:%064d","RepoTags":[%q]}`, 0, name)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"message":"No such image: %s"}`, name)
	case p == "/images/create":
		f.pulls = append(f.pulls, r.URL.Query().Get("fromImage")+":"+r.URL.Query().Get("tag"))
		// What an engine without a registry streams: an error after the request was accepted.
		_, _ = io.WriteString(w, `{"errorDetail":{"message":"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host"},"error":"no such host"}`+"\n")
	case p == "/build":
		body, _ := io.ReadAll(r.Body)
		f.contexts = append(f.contexts, body)
		f.builds = append(f.builds, r.URL.Query()["t"]...)
		_, _ = io.WriteString(w, `{"stream":"Step 1/9 : FROM scratch\n"}`+"\n"+`{"stream":"Successfully built 0123456789ab\n"}`+"\n")
	default:
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = fmt.Fprintf(w, `{"message":"fake engine: %s %s"}`, r.Method, p)
	}
}

// TestEngineEndpoint: DOCKER_HOST wins; else the first existing socket; else nothing, saying what
// was tried.
func TestEngineEndpoint(t *testing.T) {
	paths := noSockets(t)
	host, tried := engineEndpoint()
	assert.Empty(t, host)
	assert.Equal(t, paths, tried)

	l, err := net.Listen("unix", paths[1])
	require.NoError(t, err)
	defer l.Close()
	host, _ = engineEndpoint()
	assert.Equal(t, "unix://"+paths[1], host)

	// A regular file is not a socket.
	require.NoError(t, os.WriteFile(paths[0], nil, 0o600))
	host, _ = engineEndpoint()
	assert.Equal(t, "unix://"+paths[1], host)

	t.Setenv(EnvDockerHost, "tcp://127.0.0.1:2375")
	host, tried = engineEndpoint()
	assert.Equal(t, "tcp://127.0.0.1:2375", host)
	assert.Equal(t, []string{"DOCKER_HOST=tcp://127.0.0.1:2375"}, tried)

	assert.True(t, localEngine("unix:///var/run/docker.sock"))
	assert.True(t, localEngine("tcp://127.0.0.1:2375"))
	assert.True(t, localEngine("tcp://localhost:2375"))
	assert.True(t, localEngine("tcp://[::1]:2375"))
	assert.False(t, localEngine("tcp://10.0.0.5:2376"))
	assert.False(t, localEngine("ssh://user@host"))
}

// TestProbeEngineUnavailable: every way of having no engine gives an error wrapping
// ErrUnavailable that names what was tried, well before a generous deadline.
func TestProbeEngineUnavailable(t *testing.T) {
	check := func(t *testing.T, contains ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := probeEngine(ctx)
		t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
		require.ErrorIs(t, err, ErrUnavailable)
		require.NoError(t, ctx.Err(), "the probe must give up on its own (engineProbeTimeout), not at the caller's deadline")
		for _, s := range contains {
			assert.Contains(t, err.Error(), s)
		}
	}
	t.Run("no DOCKER_HOST, no socket", func(t *testing.T) {
		paths := noSockets(t)
		check(t, "DOCKER_HOST is not set", paths[0], paths[1])
	})
	t.Run("DOCKER_HOST names a missing socket", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "nosuch.sock")
		t.Setenv(EnvDockerHost, "unix://"+sock)
		check(t, "no Docker engine answers at unix://"+sock)
	})
	t.Run("socket of a dead engine", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "docker.sock")
		l, err := net.Listen("unix", sock)
		require.NoError(t, err)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, l.Close()) // the file stays, nobody listens: connection refused
		t.Setenv(EnvDockerHost, "unix://"+sock)
		check(t, "unix://"+sock)
	})
	t.Run("engine that never answers", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "docker.sock")
		l, err := net.Listen("unix", sock)
		require.NoError(t, err)
		var conns []net.Conn
		var mu sync.Mutex
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c) // accepted, never answered
				mu.Unlock()
			}
		}()
		defer func() {
			_ = l.Close()
			<-done
			mu.Lock()
			for _, c := range conns {
				_ = c.Close()
			}
			mu.Unlock()
		}()
		t.Setenv(EnvDockerHost, "unix://"+sock)
		check(t, "no Docker engine answers", "deadline exceeded")
	})
	t.Run("this machine", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := probeEngine(ctx)
		require.NoError(t, ctx.Err())
		if err == nil {
			t.Log("a Docker engine answers here")
			return
		}
		require.ErrorIs(t, err, ErrUnavailable)
		t.Logf("no engine here: %v", err)
	})
}

func TestProbeEngineFake(t *testing.T) {
	f := newFakeEngine(t)
	t.Setenv(EnvDockerHost, "unix://"+f.sock)
	require.NoError(t, probeEngine(context.Background()))
}

// TestTestcontainersDiscoveryNoEngine: testcontainers' own discovery also returns (with an error)
// instead of hanging when no engine answers. Only run without an engine: it reads testcontainers'
// configuration, which would keep testkit from disabling the reaper later in this process.
func TestTestcontainersDiscoveryNoEngine(t *testing.T) {
	if err := probeEngine(context.Background()); err == nil {
		t.Log("a Docker engine answers here: TestContainerServer covers it")
		return
	}
	// testcontainers reads its configuration once per process, here: with the reaper disabled, as
	// testkit disables it where no registry answers (TestEnsureImageOffline checks that).
	t.Setenv(EnvRyukDisabled, "true")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if cli != nil {
		_ = cli.Close()
	}
	require.Error(t, err)
	require.NoError(t, ctx.Err())
	t.Logf("testcontainers: %v", err)
}

// tbRecorder is a testing.TB whose Skip and Fatal end only the goroutine running Start.
type tbRecorder struct {
	testing.TB
	skipped, failed string
}

func (r *tbRecorder) Helper()                   {}
func (r *tbRecorder) Cleanup(func())            {}
func (r *tbRecorder) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...); runtime.Goexit() }
func (r *tbRecorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...); runtime.Goexit() }

func runStart(tb testing.TB, target Target) *tbRecorder {
	r := &tbRecorder{TB: tb}
	done := make(chan struct{})
	go func() { defer close(done); Start(r, target) }()
	<-done
	return r
}

// TestContainerBackendNoEngine: COORDKIT_TESTKIT_BACKEND=container without an engine: Launch
// returns ErrUnavailable naming what was tried; Start skips (fails with CI=true).
func TestContainerBackendNoEngine(t *testing.T) {
	t.Setenv(EnvBackend, "container")
	ctx := context.Background()
	t.Run("no socket", func(t *testing.T) {
		paths := noSockets(t)
		_, err := Launch(ctx, Redis8)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "container backend: no Docker engine")
		assert.Contains(t, err.Error(), paths[0])

		t.Setenv(EnvCI, "")
		r := runStart(t, Redis8)
		assert.Contains(t, r.skipped, "no Docker engine")
		assert.Empty(t, r.failed)

		t.Setenv(EnvCI, "true")
		r = runStart(t, Redis8)
		assert.Empty(t, r.skipped)
		assert.Contains(t, r.failed, "no Docker engine")
	})
	t.Run("DOCKER_HOST missing socket", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "nosuch.sock")
		t.Setenv(EnvDockerHost, "unix://"+sock)
		_, err := Launch(ctx, Valkey9)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), sock)
	})
	t.Run("unknown target", func(t *testing.T) {
		_, err := Launch(ctx, "redis99")
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "unknown target")
	})
	t.Run("cluster", func(t *testing.T) {
		noSockets(t)
		_, err := LaunchCluster(ctx, Redis8)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "container backend: no Docker engine")
	})
}

// TestAutoNoBinaryNoEngine: auto with neither the binary nor an engine reports both.
func TestAutoNoBinaryNoEngine(t *testing.T) {
	t.Setenv(EnvBackend, "")
	t.Setenv(EnvRedisURL, "")
	t.Setenv(EnvServerCache, shortTempDir(t)) // an empty cache: no binaries (and PATH not searched)
	t.Setenv(EnvAllowPathServer, "")
	paths := noSockets(t)
	_, err := Launch(context.Background(), Valkey9)
	require.ErrorIs(t, err, ErrUnavailable)
	for _, s := range []string{"make setup", "no container fallback", paths[0]} {
		assert.Contains(t, err.Error(), s)
	}
}

// TestContainerServer runs every available target in a container. Without an engine it asserts
// that the container backend reports unavailable (it never skips silently, also not on CI).
func TestContainerServer(t *testing.T) {
	t.Setenv(EnvBackend, "container")
	ctx := context.Background()
	if perr := probeEngine(ctx); perr != nil {
		_, err := Launch(ctx, Redis8)
		require.ErrorIs(t, err, ErrUnavailable)
		t.Logf("no Docker engine: the container backend is unavailable, as asserted: %v", err)
		return
	}
	for _, target := range Targets() {
		t.Run(string(target), func(t *testing.T) {
			s := Start(t, target, WithStartTimeout(60*time.Second))
			assert.Equal(t, BackendContainer, s.Backend)
			assert.Equal(t, target.Flavor(), s.Flavor)
			assert.Zero(t, s.PID())
			t.Logf("%s: %s %s at %s", target, s.Flavor, s.Version, s.Addr)

			_, err := s.Do(ctx, "SET", "k", "v")
			require.NoError(t, err)

			s.MustResume(t) // resuming a running server does nothing, as on the process backend
			s.MustPause(t)
			s.MustPause(t) // neither does pausing a paused one
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err = rawDo(pctx, s.Addr, 500*time.Millisecond, "PING")
			cancel()
			assert.Error(t, err, "a paused server answers nothing")
			s.MustResume(t)
			_, err = s.Do(ctx, "PING")
			require.NoError(t, err)

			s.MustKill(t)
			_, err = rawDo(ctx, s.Addr, time.Second, "PING")
			assert.Error(t, err, "a killed server answers nothing")
			s.MustRestart(t)
			msg, err := s.Do(ctx, "EXISTS", "k")
			require.NoError(t, err)
			n, err := msg.AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "a restarted server has no data")
		})
	}
}

// TestEnsureImageOffline: with an engine that cannot pull (no registry), the auto image source
// builds coordkit/<target>:local-<sha> from the cached binary, once, and the reaper is disabled.
func TestEnsureImageOffline(t *testing.T) {
	target := firstAvailable(t)
	spec, _ := lookupTarget(target)
	f := newFakeEngine(t)
	t.Setenv(EnvDockerHost, "unix://"+f.sock)
	t.Setenv(EnvImageSource, "")
	ctx := context.Background()
	cli, _, err := connectEngine(ctx)
	require.NoError(t, err)
	defer cli.Close()

	bin, err := Binary(target)
	require.NoError(t, err)
	wantTag, err := localImageTag(target, bin)
	require.NoError(t, err)

	img, err := ensureImage(ctx, cli, spec)
	require.NoError(t, err)
	assert.Equal(t, image{ref: wantTag, local: true}, img)
	img, err = ensureImage(ctx, cli, spec) // now present: no second build
	require.NoError(t, err)
	assert.Equal(t, wantTag, img.ref)

	f.mu.Lock()
	assert.Equal(t, []string{wantTag}, f.builds)
	assert.True(t, hasSuffix(f.pulls, "/"+spec.image), "pulls %v", f.pulls)
	require.Len(t, f.contexts, 1)
	names := tarNames(t, f.contexts[0])
	f.mu.Unlock()
	assert.Contains(t, names, "Dockerfile")
	assert.Contains(t, names, "rootfs/usr/local/bin/"+string(spec.flavor)+"-server")

	t.Run("pull only", func(t *testing.T) {
		t.Setenv(EnvImageSource, "pull")
		_, err := ensureImage(ctx, cli, spec)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "no such host")
	})
	t.Run("bad source", func(t *testing.T) {
		t.Setenv(EnvImageSource, "registry")
		_, err := ensureImage(ctx, cli, spec)
		require.Error(t, err)
		assert.Contains(t, err.Error(), EnvImageSource)
	})
	t.Run("reaper disabled when its image cannot be pulled", func(t *testing.T) {
		t.Setenv(EnvRyukDisabled, "") // restored at cleanup
		require.NoError(t, os.Unsetenv(EnvRyukDisabled))
		require.NoError(t, prepareReaper(ctx, cli))
		assert.Equal(t, "true", os.Getenv(EnvRyukDisabled))
		assert.True(t, testcontainers.ReadConfig().RyukDisabled)
		f.mu.Lock()
		assert.True(t, hasSuffix(f.pulls, "/"+reaperImage), "pulls %v", f.pulls)
		f.mu.Unlock()
	})
	t.Run("reaper setting of the user is kept", func(t *testing.T) {
		t.Setenv(EnvRyukDisabled, "false")
		require.NoError(t, prepareReaper(ctx, cli))
		assert.Equal(t, "false", os.Getenv(EnvRyukDisabled))
	})
}

func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	tr := tar.NewReader(strings.NewReader(string(data)))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		require.NoError(t, err)
		names = append(names, h.Name)
	}
}

func hasSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
