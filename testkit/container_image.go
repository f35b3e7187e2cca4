package testkit

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// Environment variables of the container backend.
const (
	// EnvImageSource chooses where a container's image comes from: "auto" (default: the target's
	// registry image when present or pullable, else an image built from the cached binary),
	// "pull" (the registry image only) or "local" (always the image built from the binary).
	EnvImageSource = "COORDKIT_TESTKIT_IMAGE_SOURCE"
	// EnvRyukDisabled is testcontainers' switch for its reaper container. testkit sets it to
	// "true" when the reaper image is neither present nor pullable (no registry), unless it is set.
	EnvRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"
)

const (
	imageSourceAuto  = "auto"
	imageSourcePull  = "pull"
	imageSourceLocal = "local"

	// pullTimeout bounds one image pull; a failed pull is not retried in this process.
	pullTimeout = 2 * time.Minute
	// buildTimeout bounds one local image build.
	buildTimeout = 5 * time.Minute
	// reaperImage is testcontainers-go v0.45.0's Ryuk image (internal/config.ReaperDefaultImage).
	reaperImage = "testcontainers/ryuk:0.14.0"
	// imageRecipe versions the local image layout; it is part of the tag's hash.
	imageRecipe = "coordkit-testkit-image-v1"

	imageBinDir = "/usr/local/bin"
	imageUID    = "999"
)

// image is the image a server container runs.
type image struct {
	ref   string // image reference
	local bool   // built by testkit from the binary: its ENTRYPOINT is the server itself
}

func imageSource() (string, error) {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(EnvImageSource)))
	switch v {
	case "", imageSourceAuto:
		return imageSourceAuto, nil
	case imageSourcePull, imageSourceLocal:
		return v, nil
	}
	return "", fmt.Errorf("testkit: %s=%q: want %s, %s or %s", EnvImageSource, v, imageSourceAuto, imageSourcePull, imageSourceLocal)
}

// ensureImage returns the image for spec, pulling or building it when needed (see EnvImageSource).
func ensureImage(ctx context.Context, cli *client.Client, spec targetSpec) (image, error) {
	src, err := imageSource()
	if err != nil {
		return image{}, err
	}
	var pullErr error
	if src != imageSourceLocal {
		if pullErr = ensurePulled(ctx, cli, spec.image); pullErr == nil {
			return image{ref: spec.image}, nil
		}
		if src == imageSourcePull {
			return image{}, fmt.Errorf("testkit: %s image %s: %w: %w", spec.target, spec.image, pullErr, ErrUnavailable)
		}
	}
	ref, err := ensureLocalImage(ctx, cli, spec)
	if err != nil {
		if pullErr != nil {
			return image{}, fmt.Errorf("testkit: %s: image %s cannot be pulled (%v), and no local image can be built: %w", spec.target, spec.image, pullErr, err)
		}
		return image{}, err
	}
	return image{ref: ref, local: true}, nil
}

// Pulls and builds happen once per engine, image and process; parallel tests wait for the first. (Keyed
// by engine too: a test against a second engine, such as a fake one, must not see the first one's image.)
var (
	imageOpsMu sync.Mutex
	imageOps   = map[string]*imageOp{}
)

type imageOp struct {
	done chan struct{}
	err  error
}

// once runs f for key once per process (a failure is remembered too) and returns its error.
func imageOnce(ctx context.Context, key string, f func() error) error {
	imageOpsMu.Lock()
	op, ok := imageOps[key]
	if !ok {
		op = &imageOp{done: make(chan struct{})}
		imageOps[key] = op
	}
	imageOpsMu.Unlock()
	if !ok {
		op.err = f()
		close(op.done)
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func imagePresent(ctx context.Context, cli *client.Client, ref string) bool {
	_, err := cli.ImageInspect(ctx, ref)
	return err == nil
}

// ensurePulled makes ref present: already there, or pulled (bounded by pullTimeout).
func ensurePulled(ctx context.Context, cli *client.Client, ref string) error {
	if imagePresent(ctx, cli, ref) {
		return nil
	}
	return imageOnce(ctx, cli.DaemonHost()+" pull "+ref, func() error {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pullTimeout)
		defer cancel()
		resp, err := cli.ImagePull(pctx, ref, client.ImagePullOptions{})
		if err != nil {
			return fmt.Errorf("pulling %s: %w", ref, err)
		}
		if err := resp.Wait(pctx); err != nil {
			return fmt.Errorf("pulling %s: %w", ref, err)
		}
		return nil
	})
}

// ensureLocalImage builds (once per tag) the FROM-scratch image of spec's cached binary.
func ensureLocalImage(ctx context.Context, cli *client.Client, spec targetSpec) (string, error) {
	bin, err := Binary(spec.target)
	if err != nil {
		return "", err
	}
	tag, err := localImageTag(spec.target, bin)
	if err != nil {
		return "", err
	}
	if imagePresent(ctx, cli, tag) {
		return tag, nil
	}
	err = imageOnce(ctx, cli.DaemonHost()+" build "+tag, func() error {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), buildTimeout)
		defer cancel()
		return buildImage(bctx, cli, tag, bin, spec.flavor)
	})
	if err != nil {
		return "", fmt.Errorf("testkit: building %s from %s: %w", tag, bin, err)
	}
	return tag, nil
}

// buildImage sends the build context of writeImageContext to the engine and reads the build's
// progress stream for an error.
func buildImage(ctx context.Context, cli *client.Client, tag, bin string, flavor Flavor) error {
	var buf bytes.Buffer // a few MB: the binary and its libraries
	if err := writeImageContext(&buf, bin, flavor); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{labelTestkit: "1"}, // no owner: an image is kept for the next run
	})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	var tail []string
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading build output: %w", err)
		}
		if m.Error != nil {
			return fmt.Errorf("%s (build output: %s)", m.Error.Message, strings.Join(tail, " | "))
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			tail = append(tail, s)
			if len(tail) > 10 {
				tail = tail[1:]
			}
		}
	}
}

// prepareReaper makes sure testcontainers' reaper (Ryuk) can run, or is disabled: when the user
// did not set TESTCONTAINERS_RYUK_DISABLED and the Ryuk image is neither present nor pullable (no
// registry), testkit sets TESTCONTAINERS_RYUK_DISABLED=true. Without the reaper, testkit's
// containers are removed by Close (Start: t.Cleanup); those of a killed test binary remain (docker
// rm -f $(docker ps -aq --filter label=org.coordkit.testkit)).
func prepareReaper(ctx context.Context, cli *client.Client) error {
	if _, set := os.LookupEnv(EnvRyukDisabled); set {
		return nil
	}
	var pullErr error
	if src, _ := imageSource(); src == imageSourceLocal {
		// Local images only: the registry is not to be asked for the reaper either.
		pullErr = fmt.Errorf("%s=%s: no image is pulled", EnvImageSource, imageSourceLocal)
	} else {
		pullErr = ensurePulled(ctx, cli, reaperImage)
	}
	if pullErr == nil {
		return nil
	}
	_ = os.Setenv(EnvRyukDisabled, "true")
	// testcontainers reads its configuration once per process: a read before this point keeps
	// the reaper on, and its start would fail on the pull.
	if !testcontainersConfigRyukDisabled() {
		return fmt.Errorf("testkit: the reaper image %s cannot be pulled (%v) and testcontainers had read its configuration before testkit could disable it: set %s=true: %w",
			reaperImage, pullErr, EnvRyukDisabled, ErrUnavailable)
	}
	return nil
}

// localImageTag is the tag of the image built from bin: coordkit/<target>:local-<12 hex digits of
// the SHA-256 of the build recipe version and the binary>.
func localImageTag(target Target, bin string) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("testkit: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	h.Write([]byte(imageRecipe + "\n"))
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("testkit: hashing %s: %w", bin, err)
	}
	return fmt.Sprintf("coordkit/%s:local-%s", target, hex.EncodeToString(h.Sum(nil))[:12]), nil
}

// imageFile is one file of the image's root filesystem: host path (symlinks followed) → path in
// the image.
type imageFile struct {
	host, image string
}

// imageFiles lists what the binary needs to run in an empty root filesystem: itself (as
// /usr/local/bin/<flavor>-server), its ELF interpreter (the dynamic loader, at the path the binary
// names), every library ldd lists (at the path ldd resolves), and libgcc_s when it is next to
// them (glibc loads it at run time for thread cancellation and backtraces).
func imageFiles(bin string, flavor Flavor) ([]imageFile, error) {
	files := []imageFile{{host: bin, image: path.Join(imageBinDir, string(flavor)+"-server")}}
	interp, err := elfInterpreter(bin)
	if err != nil {
		return nil, err
	}
	if interp == "" { // static binary: nothing else to copy
		return files, nil
	}
	files = append(files, imageFile{host: interp, image: interp})
	libs, err := lddLibraries(bin)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		files = append(files, imageFile{host: l, image: l})
	}
	dirs := map[string]bool{}
	for _, l := range libs {
		dirs[path.Dir(l)] = true
	}
	for _, d := range sortedKeys(dirs) {
		if g := path.Join(d, "libgcc_s.so.1"); isRegularFile(g) {
			files = append(files, imageFile{host: g, image: g})
			break
		}
	}
	// Deduplicate (ldd lists the loader too), keeping the first.
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if !seen[f.image] {
			seen[f.image] = true
			out = append(out, f)
		}
	}
	return out, nil
}

func isRegularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func sortedKeys(m map[string]bool) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// elfInterpreter returns the binary's PT_INTERP (the dynamic loader it asks for), or "" for a
// static binary.
func elfInterpreter(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("testkit: %s is not an ELF binary: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("testkit: reading the interpreter of %s: %w", bin, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// lddLibraries runs ldd on bin and returns the absolute paths of the libraries it resolves
// ("libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x...)", and a bare "/lib64/ld-linux-x86-64.so.2
// (0x...)"), without the kernel's vDSO. A library ldd cannot find is an error.
func lddLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("testkit: ldd %s: %v: %s", bin, err, bytes.TrimSpace(out))
	}
	return parseLdd(string(out))
}

func parseLdd(out string) ([]string, error) {
	var libs []string
	var missing []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "statically linked") {
			continue
		}
		name, target, arrow := strings.Cut(line, "=>")
		name = strings.TrimSpace(name)
		if arrow {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				missing = append(missing, name)
				continue
			}
			p, _, _ := strings.Cut(target, " (")
			if strings.HasPrefix(p, "/") {
				libs = append(libs, p)
			}
			continue
		}
		p, _, _ := strings.Cut(name, " (")
		if strings.HasPrefix(p, "/") {
			libs = append(libs, p)
		}
		// else: linux-vdso.so.1 and the like, provided by the kernel.
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("testkit: ldd cannot find %s", strings.Join(missing, ", "))
	}
	return slices.Compact(libs), nil
}

// imageDockerfile is the Dockerfile of the local image: the root filesystem copied into an empty
// (scratch) image; the server runs as uid 999 in /data and listens on all interfaces without
// protected mode, so that the published port reaches it.
func imageDockerfile(flavor Flavor, libDirs []string) string {
	entry, _ := json.Marshal([]string{path.Join(imageBinDir, string(flavor)+"-server"), "--bind", "0.0.0.0", "--protected-mode", "no"})
	var b strings.Builder
	fmt.Fprintf(&b, "# Built by coordkit testkit from a cached %s-server binary, without a registry.\n", flavor)
	b.WriteString("FROM scratch\n")
	b.WriteString("COPY rootfs/ /\n")
	if len(libDirs) > 0 {
		fmt.Fprintf(&b, "ENV LD_LIBRARY_PATH=%s\n", strings.Join(libDirs, ":"))
	}
	fmt.Fprintf(&b, "USER %s:%s\n", imageUID, imageUID)
	b.WriteString("WORKDIR /data\n")
	b.WriteString("EXPOSE 6379\n")
	fmt.Fprintf(&b, "ENTRYPOINT %s\n", entry)
	b.WriteString("CMD [\"--port\", \"6379\"]\n")
	return b.String()
}

// writeImageContext writes the build context of the local image for bin (a tar stream, as the
// engine's build API takes it): a Dockerfile and rootfs/ holding the binary, its loader and
// libraries (imageFiles), a minimal /etc (passwd, group, nsswitch.conf) and writable /data and
// /tmp. Entries are sorted with fixed times, so the same binary gives the same context.
func writeImageContext(w io.Writer, bin string, flavor Flavor) error {
	files, err := imageFiles(bin, flavor)
	if err != nil {
		return err
	}
	libDirs := map[string]bool{}
	for _, f := range files[1:] {
		libDirs[path.Dir(f.image)] = true
	}
	name := string(flavor)
	etc := map[string]string{
		"/etc/passwd":        fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%s:%s:%s:/data:/sbin/nologin\n", name, imageUID, imageUID, name),
		"/etc/group":         fmt.Sprintf("root:x:0:\n%s:x:%s:\n", name, imageUID),
		"/etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n",
	}

	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	dirsDone := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "/" || dir == "." || dirsDone[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		dirsDone[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + dir + "/", Mode: 0o755, ModTime: mtime})
	}
	addBytes := func(name string, data []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}

	if err := addBytes("Dockerfile", []byte(imageDockerfile(flavor, sortedKeys(libDirs))), 0o644); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs/", Mode: 0o755, ModTime: mtime}); err != nil {
		return err
	}
	for _, d := range []string{"/data", "/tmp"} {
		dirsDone[d] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + d + "/", Mode: 0o1777, ModTime: mtime}); err != nil {
			return err
		}
	}
	for _, p := range []string{"/etc/group", "/etc/nsswitch.conf", "/etc/passwd"} {
		if err := mkdirs(path.Dir(p)); err != nil {
			return err
		}
		if err := addBytes("rootfs"+p, []byte(etc[p]), 0o644); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := mkdirs(path.Dir(f.image)); err != nil {
			return err
		}
		if err := addHostFile(tw, "rootfs"+f.image, f.host, mtime); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addHostFile adds the host file (symlinks followed) as a regular file, keeping its permission bits.
func addHostFile(tw *tar.Writer, name, host string, mtime time.Time) error {
	f, err := os.Open(host)
	if err != nil {
		return fmt.Errorf("testkit: image file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("testkit: image file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("testkit: image file %s is not a regular file", host)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: mtime}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("testkit: copying %s: %w", host, err)
	}
	return nil
}

// BuildContext writes the build context of the local image of target (see
// COORDKIT_TESTKIT_IMAGE_SOURCE) into a new temporary directory and returns it with the tag
// testkit gives the image, for building by hand:
//
//	dir, tag, _ := testkit.BuildContext(testkit.Redis8) // then: docker build -t $tag $dir
//
// The caller removes dir. The error wraps ErrUnavailable when the binary is not installed.
func BuildContext(target Target) (dir, tag string, err error) {
	spec, ok := lookupTarget(target)
	if !ok {
		_, err := Binary(target)
		return "", "", err
	}
	bin, err := Binary(target)
	if err != nil {
		return "", "", err
	}
	if tag, err = localImageTag(target, bin); err != nil {
		return "", "", err
	}
	var buf bytes.Buffer
	if err := writeImageContext(&buf, bin, spec.flavor); err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "coordkit-image-"+string(target)+"-")
	if err != nil {
		return "", "", fmt.Errorf("testkit: %w", err)
	}
	if err := extractTar(&buf, dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", err
	}
	return dir, tag, nil
}

// extractTar writes a tar of directories and regular files (as writeImageContext makes) under dir.
func extractTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("testkit: reading tar: %w", err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("testkit: tar entry %q escapes %s", h.Name, dir)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, os.FileMode(h.Mode).Perm()|modeSticky(h.Mode)); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("testkit: unexpected tar entry %q (type %c)", h.Name, h.Typeflag)
		}
	}
}

func modeSticky(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// BuildImages builds (or finds, when the binary is unchanged) the local image of each target from
// its cached binary, as the container backend does on first use with
// COORDKIT_TESTKIT_IMAGE_SOURCE=local, and returns the image references in order. `make images`
// (which `make test` depends on) runs it through ./cmd/coordkit-images, so no test waits for a build
// and nothing is pulled. The error wraps ErrUnavailable without an engine or a binary.
func BuildImages(ctx context.Context, targets ...Target) ([]string, error) {
	cli, _, err := connectEngine(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	refs := make([]string, 0, len(targets))
	for _, t := range targets {
		spec, ok := lookupTarget(t)
		if !ok {
			_, err := Binary(t)
			return refs, err
		}
		ref, err := ensureLocalImage(ctx, cli, spec)
		if err != nil {
			return refs, err
		}
		refs = append(refs, ref)
	}
	return refs, nil
}
