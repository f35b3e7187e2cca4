// Package matrix is the server matrix every integration suite runs on: each standalone target that
// testkit knows (Redis 7.0, Redis 8, Valkey 8, Valkey 9) plus a 3-primary Redis Cluster and a 3-primary
// Valkey Cluster.
//
// Suites name their top-level subtests after [Target.Name] (TestLock/redis70/..., TestLock/
// redis-cluster/...), so that tools/cmd/matrix can print the suite × server summary from `go test
// -json` output.
//
// Selection: COORDKIT_TARGETS (a comma list of standalone targets, see testkit.Targets) limits the
// standalone servers; a cluster of a flavor runs when that flavor's newest target is selected (the Redis
// Cluster with redis8, the Valkey Cluster with valkey9). COORDKIT_CLUSTERS=none|redis|valkey|all
// overrides that.
package matrix

import (
	"os"
	"strings"

	"github.com/coordkit/coordkit/testkit"
)

// EnvClusters selects the clusters of the matrix: "none", "redis", "valkey", "all" or a comma list of
// "redis" and "valkey". Unset: derived from the standalone targets (see the package doc).
const EnvClusters = "COORDKIT_CLUSTERS"

// Target is one column of the matrix: a standalone server or a cluster of one target's binaries.
type Target struct {
	// Name is the subtest name: the testkit target ("redis70") or "redis-cluster" / "valkey-cluster".
	Name string
	// Server is the testkit target whose binaries run it.
	Server testkit.Target
	// Cluster is true for a 3-primary cluster.
	Cluster bool
	// Sentinel is true for a Sentinel group (a primary, a replica and three Sentinels; testkit's
	// process backend), reached through a rueidis Sentinel client. Such targets come from
	// SentinelTargets, never from Targets: a suite opts in with a test of its own.
	Sentinel bool
}

// EnvSentinels selects the Sentinel targets of SentinelTargets: "none", "redis", "valkey", "all" or
// a comma list of "redis" and "valkey". Unset: "redis" when redis8 is selected (one Sentinel target
// bounds the time `make test` spends; "all" adds the Valkey 9 one).
const EnvSentinels = "COORDKIT_SENTINELS"

// sentinelOf maps a Sentinel target's flavor to its name and the target whose binaries run it.
var sentinelOf = []struct {
	flavor string
	name   string
	target testkit.Target
}{
	{"redis", "redis-sentinel", testkit.Redis8},
	{"valkey", "valkey-sentinel", testkit.Valkey9},
}

// SentinelTargets returns the selected Sentinel targets (see EnvSentinels), for suites that run on
// Sentinel: a primary with one replica and three Sentinels, the client following the primary.
func SentinelTargets() []Target {
	selected := map[testkit.Target]bool{}
	for _, tg := range testkit.Targets() {
		selected[tg] = true
	}
	want := map[string]bool{}
	switch v := strings.TrimSpace(os.Getenv(EnvSentinels)); v {
	case "":
		want["redis"] = selected[testkit.Redis8]
	case "all":
		want["redis"], want["valkey"] = true, true
	case "none":
	default:
		for _, f := range strings.Split(v, ",") {
			want[strings.TrimSpace(f)] = true
		}
	}
	var out []Target
	for _, c := range sentinelOf {
		if want[c.flavor] {
			out = append(out, Target{Name: c.name, Server: c.target, Sentinel: true})
		}
	}
	return out
}

// clusterOf maps a cluster's flavor to its name and the target whose binaries run it.
var clusterOf = []struct {
	flavor string
	name   string
	target testkit.Target
}{
	{"redis", "redis-cluster", testkit.Redis8},
	{"valkey", "valkey-cluster", testkit.Valkey9},
}

// Targets returns the selected matrix: the standalone targets in testkit order, then the clusters.
func Targets() []Target {
	standalone := testkit.Targets()
	var out []Target
	selected := map[testkit.Target]bool{}
	for _, tg := range standalone {
		out = append(out, Target{Name: string(tg), Server: tg})
		selected[tg] = true
	}
	want := map[string]bool{}
	switch v := strings.TrimSpace(os.Getenv(EnvClusters)); v {
	case "":
		for _, c := range clusterOf {
			want[c.flavor] = selected[c.target]
		}
	case "all":
		want["redis"], want["valkey"] = true, true
	case "none":
	default:
		for _, f := range strings.Split(v, ",") {
			want[strings.TrimSpace(f)] = true
		}
	}
	for _, c := range clusterOf {
		if want[c.flavor] {
			out = append(out, Target{Name: c.name, Server: c.target, Cluster: true})
		}
	}
	return out
}
