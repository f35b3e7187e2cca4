// Package testkit starts real Redis and Valkey servers for Coordkit's tests, benchmarks and demo.
//
// A server comes from a backend chosen at run time (see README.md):
//
//   - external: COORDKIT_REDIS_URL (standalone) or COORDKIT_REDIS_CLUSTER_URL (cluster) names a
//     server the caller already runs; testkit connects to it and starts nothing.
//   - process: a redis-server / valkey-server binary from the cache that scripts/servers.sh fills
//     ("make setup") is started on a free loopback port, in its own temporary directory.
//   - container: the target's image (or one built from the cached binary where no registry
//     answers) runs under testcontainers-go, published on a loopback port, when a Docker engine
//     answers.
//
// COORDKIT_TESTKIT_BACKEND picks one (process, container, external); auto, the default, is
// external when the URL is set, else process when the binary is installed, else container.
//
// Launch and LaunchCluster are the plain API (for the demo and benchmarks); Start and StartCluster
// are the testing.TB variants that clean up after the test and skip (or fail on CI) when a server
// is not available.
package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Flavor is the server family: "redis" or "valkey". It names the binaries (<flavor>-server).
type Flavor string

// The server families.
const (
	FlavorRedis  Flavor = "redis"
	FlavorValkey Flavor = "valkey"
)

// Target names one server build in the test matrix (a row of the target table).
type Target string

// The standalone test matrix.
const (
	Redis70 Target = "redis70"
	Redis8  Target = "redis8"
	Valkey8 Target = "valkey8"
	Valkey9 Target = "valkey9"
)

// targetSpec is one row of the target table. Adding a server to the matrix is one row here (plus
// one line in scripts/servers.sh, which installs the binary).
type targetSpec struct {
	target  Target
	flavor  Flavor
	version string // prefix that `<flavor>-server --version` must show for a binary found on PATH
	image   string // image for the (future) container backend
}

var targetTable = []targetSpec{
	{Redis70, FlavorRedis, "7.0.", "redis:7.0"},
	{Redis8, FlavorRedis, "8.", "redis:8.0"},
	{Valkey8, FlavorValkey, "8.", "valkey/valkey:8.0"},
	{Valkey9, FlavorValkey, "9.", "valkey/valkey:9.0"},
}

func lookupTarget(t Target) (targetSpec, bool) {
	for _, s := range targetTable {
		if s.target == t {
			return s, true
		}
	}
	return targetSpec{}, false
}

// Flavor reports the server family the target belongs to, or "" for an unknown target.
func (t Target) Flavor() Flavor {
	s, _ := lookupTarget(t)
	return s.flavor
}

// Known reports whether the target is a row of the target table.
func (t Target) Known() bool {
	_, ok := lookupTarget(t)
	return ok
}

// AllTargets returns the standalone matrix, in order.
func AllTargets() []Target {
	out := make([]Target, len(targetTable))
	for i, s := range targetTable {
		out[i] = s.target
	}
	return out
}

// Targets returns the targets to test: the comma-separated list in COORDKIT_TARGETS (spaces and
// empty entries ignored, duplicates dropped, "all" meaning AllTargets), or AllTargets when the
// variable is unset or empty. Unknown names are kept, so that Start reports them.
func Targets() []Target {
	return ParseTargets(os.Getenv(EnvTargets))
}

// ParseTargets parses a COORDKIT_TARGETS value; see Targets.
func ParseTargets(list string) []Target {
	var out []Target
	seen := map[Target]bool{}
	add := func(t Target) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch f {
		case "":
		case "all":
			for _, t := range AllTargets() {
				add(t)
			}
		default:
			add(Target(f))
		}
	}
	if len(out) == 0 {
		return AllTargets()
	}
	return out
}

// Environment variables read by testkit.
const (
	EnvRedisURL        = "COORDKIT_REDIS_URL"         // external standalone server (redis://... or host:port)
	EnvRedisClusterURL = "COORDKIT_REDIS_CLUSTER_URL" // external cluster: comma-separated addresses
	EnvTargets         = "COORDKIT_TARGETS"           // comma-separated targets to test
	EnvServerCache     = "COORDKIT_SERVER_CACHE"      // where scripts/servers.sh puts binaries
	EnvAllowPathServer = "COORDKIT_ALLOW_PATH_SERVER" // "1": fall back to <flavor>-server on PATH
	EnvCI              = "CI"                         // "true": unavailable servers fail tests instead of skipping
)

// ErrUnavailable is wrapped by errors that mean "this server cannot be provided here" (no binary,
// unknown target), as opposed to a server that was found but failed. Start skips on it (fails on CI).
var ErrUnavailable = errors.New("server unavailable")

// CacheDir returns the server cache directory: $COORDKIT_SERVER_CACHE, else
// $XDG_CACHE_HOME/coordkit/servers, else $HOME/.cache/coordkit/servers.
func CacheDir() string {
	if d := os.Getenv(EnvServerCache); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "coordkit", "servers")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "coordkit", "servers")
	}
	return filepath.Join(home, ".cache", "coordkit", "servers")
}

// Binary returns the server binary for target: <cache>/<target>/bin/<flavor>-server when it is
// there. Otherwise it falls back to <flavor>-server on PATH, but only when
// COORDKIT_ALLOW_PATH_SERVER=1 or the cache directory does not exist at all (a machine that never
// ran "make setup"); a PATH binary must report the target's version in `--version`, so that a
// Redis 7.0 on PATH never stands in for Redis 8. The error (wrapping ErrUnavailable) says how to
// install the binary.
func Binary(target Target) (string, error) {
	spec, ok := lookupTarget(target)
	if !ok {
		return "", fmt.Errorf("testkit: unknown target %q (known: %s): %w", target, joinTargets(AllTargets()), ErrUnavailable)
	}
	name := string(spec.flavor) + "-server"
	cache := CacheDir()
	cached := filepath.Join(cache, string(target), "bin", name)
	if isExecutable(cached) {
		return cached, nil
	}
	_, statErr := os.Stat(cache)
	noCache := errors.Is(statErr, os.ErrNotExist)
	allowPath := os.Getenv(EnvAllowPathServer) == "1"
	var pathNote string
	if allowPath || noCache {
		p, err := exec.LookPath(name)
		if err == nil {
			v, verr := binaryVersion(p)
			if verr == nil && strings.HasPrefix(v, spec.version) {
				return p, nil
			}
			if verr != nil {
				pathNote = fmt.Sprintf("; %s on PATH does not run: %v", p, verr)
			} else {
				pathNote = fmt.Sprintf("; %s on PATH is version %s, target %s needs %s*", p, v, target, spec.version)
			}
		} else {
			pathNote = fmt.Sprintf("; no %s on PATH", name)
		}
	} else {
		pathNote = fmt.Sprintf("; PATH not searched (set %s=1 to allow it)", EnvAllowPathServer)
	}
	return "", fmt.Errorf("testkit: no %s for target %s: %s not found%s; run make setup (or scripts/servers.sh %s) to install it, or set %s to use your own server: %w",
		name, target, cached, pathNote, target, EnvRedisURL, ErrUnavailable)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// binaryVersion runs `<bin> --version` and returns the v=... field ("Redis server v=7.0.15 sha=...").
func binaryVersion(bin string) (string, error) {
	cmd := exec.Command(bin, "--version")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return "", errors.New("--version timed out")
	}
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("unexpected --version output %q", strings.TrimSpace(string(out)))
}

func joinTargets(ts []Target) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// Option configures Launch, Start, LaunchCluster and StartCluster.
type Option func(*config)

type config struct {
	args         []string
	startTimeout time.Duration
	replicas     int           // cluster: replicas per primary (WithReplicas)
	nodeTimeout  time.Duration // cluster: --cluster-node-timeout (WithNodeTimeout)
	networks     []*Network    // container backend: WithNetwork
}

// WithArgs appends extra command-line arguments for the server process (for example
// WithArgs("--maxmemory", "10mb")). The external backend ignores them.
func WithArgs(extra ...string) Option {
	return func(c *config) { c.args = append(c.args, extra...) }
}

// WithStartTimeout bounds how long a start (or Restart) waits for the server to answer PING, and a
// cluster to become ready. Default: 15s for a server, 30s for a cluster.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

func newConfig(def time.Duration, opts []Option) *config {
	c := &config{startTimeout: def}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.startTimeout <= 0 {
		c.startTimeout = def
	}
	return c
}

func isCI() bool {
	v, err := strconv.ParseBool(os.Getenv(EnvCI))
	return err == nil && v
}
