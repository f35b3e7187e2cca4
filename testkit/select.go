package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// EnvBackend chooses the backend: "process", "container", "external" or "auto" (the default).
const EnvBackend = "COORDKIT_TESTKIT_BACKEND"

// BackendAuto is the default value of COORDKIT_TESTKIT_BACKEND (not a Server.Backend value).
const BackendAuto = "auto"

// backendMode reads COORDKIT_TESTKIT_BACKEND: lower-cased and trimmed, "" meaning auto. An unknown
// value is an error (a typo must not silently run another backend).
func backendMode(raw string) (string, error) {
	m := strings.ToLower(strings.TrimSpace(raw))
	switch m {
	case "", BackendAuto:
		return BackendAuto, nil
	case BackendProcess, BackendContainer, BackendExternal:
		return m, nil
	}
	return "", fmt.Errorf("testkit: %s=%q: want %s, %s, %s or %s", EnvBackend, raw,
		BackendProcess, BackendContainer, BackendExternal, BackendAuto)
}

// selection is everything that decides the backend, so that the decision is a pure function
// (chooseBackend) that tests drive with fakes.
type selection struct {
	mode    string // COORDKIT_TESTKIT_BACKEND, raw
	url     string // COORDKIT_REDIS_URL, or COORDKIT_REDIS_CLUSTER_URL for a cluster
	cluster bool

	// binary reports whether target's server binary is installed (Binary); engine whether a
	// container engine answers (probeEngine). Either error wraps ErrUnavailable.
	binary func(Target) error
	engine func(context.Context) error
}

func envSelection(cluster bool) selection {
	urlVar := EnvRedisURL
	if cluster {
		urlVar = EnvRedisClusterURL
	}
	return selection{
		mode:    os.Getenv(EnvBackend),
		url:     strings.TrimSpace(os.Getenv(urlVar)),
		cluster: cluster,
		binary:  func(t Target) error { _, err := Binary(t); return err },
		engine:  func(ctx context.Context) error { return probeEngine(ctx) },
	}
}

func (s selection) urlVar() string {
	if s.cluster {
		return EnvRedisClusterURL
	}
	return EnvRedisURL
}

// modeBackend is the backend the mode names, without looking at a target: auto is external when
// the URL is set, else process (the default). LaunchReplicated and other process-only helpers
// check its name.
func (s selection) modeBackend() backend {
	mode, err := backendMode(s.mode)
	if err != nil {
		return errBackend{label: BackendAuto, err: err}
	}
	switch mode {
	case BackendProcess:
		return processBackend{}
	case BackendContainer:
		return containerBackend{}
	case BackendExternal:
		if s.url == "" {
			return errBackend{label: BackendExternal, err: fmt.Errorf("testkit: %s=external but %s is not set: %w", EnvBackend, s.urlVar(), ErrUnavailable)}
		}
		return externalBackend{url: s.url}
	}
	if s.url != "" {
		return externalBackend{url: s.url}
	}
	return processBackend{}
}

// chooseBackend picks the backend that provides target.
//
//   - process, container, external: that backend (external needs the URL variable; a container
//     backend without an engine, or a process backend without the binary, fails at launch with an
//     error wrapping ErrUnavailable).
//   - auto (default): external when the URL variable is set; else process when target's binary is
//     installed; else container when a Docker engine answers (standalone servers only: a container
//     cluster must be chosen explicitly); else an
//     error wrapping ErrUnavailable that gives both reasons.
func (s selection) chooseBackend(ctx context.Context, target Target) (backend, error) {
	mode, err := backendMode(s.mode)
	if err != nil {
		return nil, err
	}
	if mode != BackendAuto || s.url != "" {
		b := s.modeBackend()
		if eb, ok := b.(errBackend); ok {
			return nil, eb.err
		}
		return b, nil
	}
	binErr := s.binary(target)
	if binErr == nil {
		return processBackend{}, nil
	}
	if !target.Known() || !errors.Is(binErr, ErrUnavailable) {
		return nil, binErr
	}
	if s.cluster {
		// A container cluster needs container addresses routable from here: chosen explicitly only.
		return nil, fmt.Errorf("%w (auto falls back to containers for standalone servers only: set %s=%s for a container cluster)", binErr, EnvBackend, BackendContainer)
	}
	engErr := s.engine(ctx)
	if engErr == nil {
		return containerBackend{}, nil
	}
	return nil, fmt.Errorf("%w; and no container fallback: %w", binErr, engErr)
}

// resolveBackend is chooseBackend from the environment; a failure becomes an errBackend, so that
// Launch reports it.
func resolveBackend(ctx context.Context, cluster bool, target Target) backend {
	b, err := envSelection(cluster).chooseBackend(ctx, target)
	if err != nil {
		return errBackend{label: BackendAuto, err: err}
	}
	return b
}

// errBackend is a backend that could not be chosen: every launch returns err.
type errBackend struct {
	label string
	err   error
}

func (b errBackend) name() string { return b.label }
func (b errBackend) launch(context.Context, Target, *config) (*Server, error) {
	return nil, b.err
}
func (b errBackend) launchCluster(context.Context, Target, *config) (*Cluster, error) {
	return nil, b.err
}
