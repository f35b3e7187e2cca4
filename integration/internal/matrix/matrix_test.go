package matrix

import (
	"testing"

	"github.com/coordkit/coordkit/testkit"
)

func names(ts []Target) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ","
		}
		s += t.Name
	}
	return s
}

func TestTargets(t *testing.T) {
	tests := []struct {
		targets, clusters, want string
	}{
		{"", "", "redis70,redis8,valkey8,valkey9,redis-cluster,valkey-cluster"},
		{"redis70", "", "redis70"},
		{"redis8", "", "redis8,redis-cluster"},
		{"valkey9,redis70", "", "valkey9,redis70,valkey-cluster"},
		{"redis70", "all", "redis70,redis-cluster,valkey-cluster"},
		{"", "none", "redis70,redis8,valkey8,valkey9"},
		{"redis8", "valkey", "redis8,valkey-cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.targets+"|"+tt.clusters, func(t *testing.T) {
			t.Setenv(testkit.EnvTargets, tt.targets)
			t.Setenv(EnvClusters, tt.clusters)
			if got := names(Targets()); got != tt.want {
				t.Fatalf("Targets() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSentinelTargets(t *testing.T) {
	tests := []struct {
		targets, sentinels, want string
	}{
		{"", "", "redis-sentinel"},
		{"redis70", "", ""},
		{"valkey9", "", ""},
		{"redis70", "all", "redis-sentinel,valkey-sentinel"},
		{"", "none", ""},
		{"", "valkey", "valkey-sentinel"},
	}
	for _, tt := range tests {
		t.Run(tt.targets+"|"+tt.sentinels, func(t *testing.T) {
			t.Setenv(testkit.EnvTargets, tt.targets)
			t.Setenv(EnvSentinels, tt.sentinels)
			if got := names(SentinelTargets()); got != tt.want {
				t.Fatalf("SentinelTargets() = %s, want %s", got, tt.want)
			}
		})
	}
}
