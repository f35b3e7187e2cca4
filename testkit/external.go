package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// externalBackend connects to servers the caller runs (COORDKIT_REDIS_URL,
// COORDKIT_REDIS_CLUSTER_URL); it starts and stops nothing, and cannot inject faults.
type externalBackend struct{ url string }

func (externalBackend) name() string { return BackendExternal }

// parseExternal parses one address: a redis:// / rediss:// / unix:// URL (credentials, TLS and DB
// are kept) or a bare host:port.
func parseExternal(u string) (rueidis.ClientOption, error) {
	u = strings.TrimSpace(u)
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	opt, err := rueidis.ParseURL(u)
	if err != nil {
		return opt, err
	}
	if len(opt.InitAddress) == 0 || opt.InitAddress[0] == "" {
		return opt, errors.New("no address")
	}
	return opt, nil
}

func (b externalBackend) launch(ctx context.Context, target Target, cfg *config) (*Server, error) {
	if !target.Known() {
		_, err := Binary(target) // the unknown-target error
		return nil, err
	}
	opt, err := parseExternal(b.url)
	if err != nil {
		return nil, fmt.Errorf("testkit: %s: %w", EnvRedisURL, err)
	}
	s := &Server{Addr: opt.InitAddress[0], Target: target, Backend: BackendExternal, inst: externalInstance{}, base: opt}
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if err := s.fillInfo(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("testkit: external server %s (%s): %w", s.Addr, EnvRedisURL, err)
	}
	return s, nil
}

func (b externalBackend) launchCluster(ctx context.Context, target Target, cfg *config) (*Cluster, error) {
	if !target.Known() {
		_, err := Binary(target)
		return nil, err
	}
	c := &Cluster{Target: target}
	for _, u := range strings.Split(b.url, ",") {
		if strings.TrimSpace(u) == "" {
			continue
		}
		opt, err := parseExternal(u)
		if err != nil {
			return nil, fmt.Errorf("testkit: %s: %w", EnvRedisClusterURL, err)
		}
		if len(c.Nodes) == 0 {
			c.base = opt
		}
		c.Nodes = append(c.Nodes, &Server{Addr: opt.InitAddress[0], Target: target, Backend: BackendExternal, inst: externalInstance{}, base: opt})
		c.Addrs = append(c.Addrs, opt.InitAddress[0])
	}
	if len(c.Nodes) == 0 {
		return nil, fmt.Errorf("testkit: %s has no address", EnvRedisClusterURL)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.fillInfo(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("testkit: external cluster node %s (%s): %w", n.Addr, EnvRedisClusterURL, err)
		}
	}
	c.Flavor, c.Version = c.Nodes[0].Flavor, c.Nodes[0].Version
	return c, nil
}

type externalInstance struct{}

func unsupported(op string) error {
	return fmt.Errorf("testkit: %s is not supported on external backend: %w", op, ErrUnsupported)
}

func (externalInstance) pid() int                      { return 0 }
func (externalInstance) pause() error                  { return unsupported("Pause") }
func (externalInstance) resume() error                 { return unsupported("Resume") }
func (externalInstance) kill() error                   { return unsupported("Kill") }
func (externalInstance) restart(context.Context) error { return unsupported("Restart") }
func (externalInstance) close() error                  { return nil }
