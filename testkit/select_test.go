package testkit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChooseBackend drives the selection with fake probes: COORDKIT_TESTKIT_BACKEND × URL ×
// installed binary × answering engine → backend or error.
func TestChooseBackend(t *testing.T) {
	errNoBinary := fmt.Errorf("no redis-server for target redis8: run make setup: %w", ErrUnavailable)
	errNoEngine := fmt.Errorf("no Docker engine: DOCKER_HOST is not set and no socket at /var/run/docker.sock: %w", ErrUnavailable)
	type env struct {
		mode, url     string
		cluster       bool
		binary        bool // the target's binary is installed
		engine        bool // a Docker engine answers
		target        Target
		engineAllowed bool // the engine may be probed
	}
	tests := []struct {
		name        string
		env         env
		want        string   // backend name; "" when an error is expected
		unavailable bool     // the error wraps ErrUnavailable
		contains    []string // in the error
	}{
		{"auto url → external", env{url: "127.0.0.1:6379", binary: true, engine: true}, BackendExternal, false, nil},
		{"auto word url → external", env{mode: "AUTO", url: "127.0.0.1:6379"}, BackendExternal, false, nil},
		{"auto binary → process", env{binary: true, engine: true}, BackendProcess, false, nil},
		{"auto no binary, engine → container", env{engine: true, engineAllowed: true}, BackendContainer, false, nil},
		{"auto nothing → unavailable", env{engineAllowed: true}, "", true, []string{"make setup", "no container fallback", "DOCKER_HOST", "/var/run/docker.sock"}},
		{"auto cluster url → external", env{cluster: true, url: "a:1,b:2"}, BackendExternal, false, nil},
		{"auto cluster binary → process", env{cluster: true, binary: true, engine: true}, BackendProcess, false, nil},
		{"auto cluster no binary → unavailable, no container", env{cluster: true, engine: true}, "", true, []string{"make setup", "standalone servers only"}},
		{"auto unknown target → unknown target error", env{target: "redis99", engine: true}, "", true, []string{`unknown target "redis99"`}},
		{"process wins over url", env{mode: "process", url: "127.0.0.1:6379"}, BackendProcess, false, nil},
		{"process without binary is still process (fails at launch)", env{mode: "process"}, BackendProcess, false, nil},
		{"container, spaces and case", env{mode: " Container ", binary: true, url: "x:1"}, BackendContainer, false, nil},
		{"container without engine is still container (fails at launch)", env{mode: "container"}, BackendContainer, false, nil},
		{"container cluster (fails at launch)", env{mode: "container", cluster: true}, BackendContainer, false, nil},
		{"external with url", env{mode: "external", url: "127.0.0.1:6379", binary: true}, BackendExternal, false, nil},
		{"external without url → unavailable", env{mode: "external", binary: true}, "", true, []string{"COORDKIT_TESTKIT_BACKEND=external", EnvRedisURL}},
		{"external cluster without url → unavailable", env{mode: "external", cluster: true}, "", true, []string{EnvRedisClusterURL}},
		{"typo → plain error", env{mode: "docker", binary: true}, "", false, []string{`COORDKIT_TESTKIT_BACKEND="docker"`, "process, container, external or auto"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.env.target
			if target == "" {
				target = Redis8
			}
			engineCalls := 0
			sel := selection{
				mode: tc.env.mode, url: tc.env.url, cluster: tc.env.cluster,
				binary: func(tg Target) error {
					if !tg.Known() {
						_, err := Binary(tg)
						return err
					}
					if tc.env.binary {
						return nil
					}
					return errNoBinary
				},
				engine: func(context.Context) error {
					engineCalls++
					if tc.env.engine {
						return nil
					}
					return errNoEngine
				},
			}
			b, err := sel.chooseBackend(context.Background(), target)
			if !tc.env.engineAllowed {
				assert.Zero(t, engineCalls, "the engine must not be probed")
			}
			if tc.want != "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, b.name())
				return
			}
			require.Error(t, err)
			assert.Nil(t, b)
			assert.Equal(t, tc.unavailable, errors.Is(err, ErrUnavailable), "wraps ErrUnavailable: %v", err)
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// TestSelectBackendMode: the mode-level backend (no target) that process-only helpers check.
func TestSelectBackendMode(t *testing.T) {
	for _, tc := range []struct{ mode, url, want string }{
		{"", "", BackendProcess},
		{"", "127.0.0.1:1", BackendExternal},
		{"auto", "", BackendProcess},
		{"process", "127.0.0.1:1", BackendProcess},
		{"container", "", BackendContainer},
		{"external", "127.0.0.1:1", BackendExternal},
	} {
		t.Run(tc.mode+"/"+tc.url, func(t *testing.T) {
			t.Setenv(EnvBackend, tc.mode)
			t.Setenv(EnvRedisURL, tc.url)
			t.Setenv(EnvRedisClusterURL, tc.url)
			assert.Equal(t, tc.want, selectBackend(false).name())
			assert.Equal(t, tc.want, selectBackend(true).name())
		})
	}
	t.Run("bad mode fails launch", func(t *testing.T) {
		t.Setenv(EnvBackend, "podman")
		_, err := Launch(context.Background(), Redis8)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), EnvBackend)
		_, err = LaunchCluster(context.Background(), Redis8)
		require.Error(t, err)
		assert.Contains(t, err.Error(), EnvBackend)
	})
}
