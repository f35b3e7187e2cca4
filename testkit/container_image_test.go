package testkit

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007ffc8d5f2000)
	libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f0f1c9a0000)
	libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f0f1c8f0000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0f1c700000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f0f1cb00000)
`
	libs, err := parseLdd(out)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libssl.so.3",
		"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2",
	}, libs)

	_, err = parseLdd("\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libfoo.so.1")

	libs, err = parseLdd("\tstatically linked\n")
	require.NoError(t, err)
	assert.Empty(t, libs)
}

// imageTestBinaries returns the server binaries installed here, plus ls as a dynamically linked
// binary every machine has, so that the image-context tests never depend on `make setup`.
func imageTestBinaries(t *testing.T) map[string]Flavor {
	t.Helper()
	bins := map[string]Flavor{}
	for _, target := range AllTargets() {
		if b, err := Binary(target); err == nil {
			bins[b] = target.Flavor()
		}
	}
	ls, err := exec.LookPath("ls")
	require.NoError(t, err)
	bins[ls] = FlavorRedis
	return bins
}

// lddPaths is an independent reading of ldd's output: every absolute path it prints.
var lddPathRE = regexp.MustCompile(`(/[^\s]+) \(0x`)

func lddPaths(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("ldd", bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var paths []string
	for _, m := range lddPathRE.FindAllStringSubmatch(string(out), -1) {
		paths = append(paths, m[1])
	}
	require.NotEmpty(t, paths, "ldd %s: %s", bin, out)
	return paths
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readTar(t *testing.T, r io.Reader) map[string]tarEntry {
	t.Helper()
	tr := tar.NewReader(r)
	m := map[string]tarEntry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		_, dup := m[h.Name]
		require.False(t, dup, "duplicate tar entry %s", h.Name)
		m[h.Name] = tarEntry{h, data}
	}
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// TestWriteImageContext checks the local image's build context without an engine: the binary,
// every library ldd lists, the loader, /etc, and a Dockerfile whose ENTRYPOINT runs the server
// with --bind 0.0.0.0 --protected-mode no.
func TestWriteImageContext(t *testing.T) {
	for bin, flavor := range imageTestBinaries(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(bin)))+"/"+filepath.Base(bin), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			require.NoError(t, writeImageContext(&buf, bin, flavor))
			ctxTar := buf.Bytes()
			entries := readTar(t, bytes.NewReader(ctxTar))

			server := "rootfs/usr/local/bin/" + string(flavor) + "-server"
			require.Contains(t, entries, server)
			assert.Equal(t, sha(t, bin), sha256.Sum256(entries[server].data), "the binary, unchanged")
			assert.NotZero(t, entries[server].hdr.Mode&0o111, "executable")

			for _, lib := range lddPaths(t, bin) {
				e, ok := entries["rootfs"+lib]
				if assert.True(t, ok, "library %s", lib) {
					assert.Equal(t, sha(t, lib), sha256.Sum256(e.data), "library %s (symlinks followed)", lib)
					assert.Equal(t, byte(tar.TypeReg), e.hdr.Typeflag)
				}
			}
			interp, err := elfInterpreter(bin)
			require.NoError(t, err)
			require.NotEmpty(t, interp)
			assert.Contains(t, entries, "rootfs"+interp, "the dynamic loader")

			for _, f := range []string{"rootfs/etc/passwd", "rootfs/etc/group", "rootfs/etc/nsswitch.conf"} {
				assert.Contains(t, entries, f)
			}
			assert.Contains(t, string(entries["rootfs/etc/passwd"].data), "root:x:0:0:")
			assert.Contains(t, string(entries["rootfs/etc/passwd"].data), ":999:999:")
			assert.Contains(t, string(entries["rootfs/etc/nsswitch.conf"].data), "passwd: files")
			assert.EqualValues(t, 0o1777, entries["rootfs/data/"].hdr.Mode)

			df := string(entries["Dockerfile"].data)
			require.NotEmpty(t, df)
			assert.Contains(t, df, "FROM scratch\n")
			assert.Contains(t, df, "COPY rootfs/ /\n")
			entry := dockerfileEntrypoint(t, df)
			assert.Equal(t, []string{"/usr/local/bin/" + string(flavor) + "-server", "--bind", "0.0.0.0", "--protected-mode", "no"}, entry)

			// Deterministic: the same binary gives the same context (the engine's build cache).
			var again bytes.Buffer
			require.NoError(t, writeImageContext(&again, bin, flavor))
			assert.True(t, bytes.Equal(ctxTar, again.Bytes()), "same context twice")
		})
	}
}

func dockerfileEntrypoint(t *testing.T, df string) []string {
	t.Helper()
	for _, line := range strings.Split(df, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			var entry []string
			require.NoError(t, json.Unmarshal([]byte(rest), &entry), "ENTRYPOINT in exec form")
			return entry
		}
	}
	t.Fatalf("no ENTRYPOINT in Dockerfile:\n%s", df)
	return nil
}

// TestImageRootfsRuns extracts the build context and runs each installed server's ENTRYPOINT
// chrooted into rootfs/ (nothing from the host's filesystem is visible), as the scratch image
// would, until it answers PING. chroot needs root; without it the test checks only the layout.
func TestImageRootfsRuns(t *testing.T) {
	ran := 0
	for _, target := range AllTargets() {
		bin, err := Binary(target)
		if err != nil {
			continue
		}
		t.Run(string(target), func(t *testing.T) {
			dir, tag, err := BuildContext(target)
			require.NoError(t, err)
			defer os.RemoveAll(dir)
			wantTag, err := localImageTag(target, bin)
			require.NoError(t, err)
			assert.Equal(t, wantTag, tag)
			df, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
			require.NoError(t, err)
			root := filepath.Join(dir, "rootfs")
			entry := dockerfileEntrypoint(t, string(df))
			require.FileExists(t, filepath.Join(root, entry[0]))
			if os.Geteuid() != 0 {
				t.Logf("not root: cannot chroot into %s; layout checked only", root)
				return
			}
			ran++
			port, err := freePort()
			require.NoError(t, err)
			// Later arguments win: listen on loopback only, on a free port, in /data.
			args := append(entry[1:], "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
			cmd := exec.Command(entry[0], args...)
			cmd.Dir = "/data"
			cmd.Env = []string{"LD_LIBRARY_PATH=" + dockerfileEnv(string(df), "LD_LIBRARY_PATH")}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Pdeathsig: syscall.SIGKILL,
				Credential: &syscall.Credential{Uid: 999, Gid: 999}}
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
				<-done
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			addr := "127.0.0.1:" + strconv.Itoa(port)
			for {
				reply, err := rawDo(ctx, addr, time.Second, "PING")
				if err == nil && reply == "PONG" {
					break
				}
				select {
				case err := <-done:
					done <- err
					t.Fatalf("server in the image rootfs exited: %v\n%s", err, out.String())
				case <-ctx.Done():
					t.Fatalf("server in the image rootfs does not answer: %v\n%s", err, out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			info, err := rawDo(ctx, addr, time.Second, "INFO", "server")
			require.NoError(t, err)
			flavor, version, err := flavorVersion(parseInfo(info.(string)))
			require.NoError(t, err)
			assert.Equal(t, target.Flavor(), flavor)
			t.Logf("%s %s runs from the scratch rootfs (%s)", flavor, version, tag)
		})
	}
	if os.Geteuid() == 0 {
		t.Logf("ran %d server(s) from their image rootfs", ran)
	}
}

func dockerfileEnv(df, name string) string {
	for _, line := range strings.Split(df, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "+name+"="); ok {
			return rest
		}
	}
	return ""
}

func TestLocalImageTag(t *testing.T) {
	d := t.TempDir()
	a, b := filepath.Join(d, "a"), filepath.Join(d, "b")
	require.NoError(t, os.WriteFile(a, []byte("binary one"), 0o755))
	require.NoError(t, os.WriteFile(b, []byte("binary two"), 0o755))
	ta, err := localImageTag(Redis8, a)
	require.NoError(t, err)
	assert.Regexp(t, `^coordkit/redis8:local-[0-9a-f]{12}$`, ta)
	ta2, err := localImageTag(Redis8, a)
	require.NoError(t, err)
	assert.Equal(t, ta, ta2)
	tb, err := localImageTag(Redis8, b)
	require.NoError(t, err)
	assert.NotEqual(t, ta, tb)
	_, err = localImageTag(Redis8, filepath.Join(d, "missing"))
	assert.Error(t, err)
}

func TestBuildContextUnavailable(t *testing.T) {
	_, _, err := BuildContext("redis99")
	assert.ErrorIs(t, err, ErrUnavailable)
	t.Setenv(EnvServerCache, t.TempDir())
	t.Setenv(EnvAllowPathServer, "")
	_, _, err = BuildContext(Valkey9)
	assert.ErrorIs(t, err, ErrUnavailable)
}
