package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Network is a private Docker network (a user-defined bridge with its own subnet) for the container
// backend: servers started WithNetwork join it, and their address on it (container IP, port 6379) is
// reachable from this machine when the engine runs here on Linux. Disconnecting a server from a
// network (Server.Disconnect) partitions it from everything that reaches it through that network,
// this test binary included; Server.Reconnect heals the partition with the same address.
type Network struct {
	Name string // the Docker network's name, coordkit-<16 hex digits>

	cli       *client.Client
	id        string
	subnet    netip.Prefix
	mu        sync.Mutex
	next      netip.Addr // the next address to hand out (the gateway is .1)
	closeOnce sync.Once
	closeErr  error
}

// LaunchNetwork creates a private network (labelled as testkit's, so a sweep removes it after a
// killed test binary). The caller must Close it, after the containers on it. Without an engine the
// error wraps ErrUnavailable.
func LaunchNetwork(ctx context.Context) (*Network, error) {
	cli, _, err := connectEngine(ctx)
	if err != nil {
		return nil, err
	}
	sweepBeforeFirstContainer(ctx, cli)
	var b [8]byte
	_, _ = rand.Read(b[:])
	n := &Network{Name: "coordkit-" + hex.EncodeToString(b[:]), cli: cli}
	// A subnet of our own, so that Reconnect can ask for the address the server had; retried with
	// another subnet when one overlaps an existing network (other test binaries make networks too).
	var last error
	for range 8 {
		x, _ := rand.Int(rand.Reader, big.NewInt(200))
		y, _ := rand.Int(rand.Reader, big.NewInt(256))
		subnet := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 30+x.Int64(), y.Int64()))
		res, err := cli.NetworkCreate(ctx, n.Name, client.NetworkCreateOptions{
			Driver: "bridge",
			Labels: testkitLabels(nil),
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
		})
		if err == nil {
			n.id, n.subnet = res.ID, subnet
			n.next = subnet.Addr().Next().Next()
			return n, nil
		}
		last = err
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	_ = cli.Close()
	return nil, fmt.Errorf("testkit: creating network %s: %w", n.Name, last)
}

// NewNetwork is LaunchNetwork for tests: closed at t.Cleanup (registered first, so it runs after
// the cleanups of the servers started on it later); skipped without an engine (fails when CI=true).
func NewNetwork(t testing.TB) *Network {
	t.Helper()
	n, err := LaunchNetwork(context.Background())
	if err != nil {
		FailOrSkip(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("testkit: %v", err)
		}
	})
	return n
}

// allocate returns a fixed address for a new container, so that a restarted or reconnected
// container keeps it.
func (n *Network) allocate() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.next
	if !n.subnet.Contains(a) || a == lastAddr(n.subnet) {
		return netip.Addr{}, fmt.Errorf("testkit: network %s: no address left in %s", n.Name, n.subnet)
	}
	n.next = a.Next()
	return a, nil
}

func lastAddr(p netip.Prefix) netip.Addr { // the broadcast address of an IPv4 /24
	b := p.Addr().As4()
	b[3] = 255
	return netip.AddrFrom4(b)
}

// Close removes the network (its containers must be gone or disconnected). Idempotent.
func (n *Network) Close() error {
	n.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
		defer cancel()
		if _, err := n.cli.NetworkRemove(ctx, n.id, client.NetworkRemoveOptions{}); err != nil {
			n.closeErr = fmt.Errorf("removing network %s: %w", n.Name, err)
		}
		n.closeErr = errors.Join(n.closeErr, n.cli.Close())
	})
	return n.closeErr
}

// WithNetwork attaches a container-backend server to the given networks (the first one at
// creation, the others right after it starts) instead of publishing its port: Server.Addr is its
// address on the first network (container IP:6379), AddrOn gives the others. The process and
// external backends refuse it (an error wrapping ErrUnsupported and ErrUnavailable: Start skips, or
// fails when CI=true).
func WithNetwork(nets ...*Network) Option {
	return func(c *config) { c.networks = append(c.networks, nets...) }
}

// AddrOn returns the server's address (host:port) on network n: "" when it is not a container
// server started WithNetwork(…, n, …).
func (s *Server) AddrOn(n *Network) string {
	c, ok := s.inst.(*ctr)
	if !ok {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ip, ok := c.ips[n.Name]; ok {
		return net.JoinHostPort(ip.String(), "6379")
	}
	return ""
}

// Disconnect partitions the server from network n (docker network disconnect): every connection
// through n breaks (packets are no longer delivered) and nobody reaches it there until Reconnect.
// Container servers started WithNetwork only (else an error wrapping ErrUnsupported).
func (s *Server) Disconnect(ctx context.Context, n *Network) error {
	c, ok := s.inst.(*ctr)
	if !ok || c.ips == nil {
		return fmt.Errorf("testkit: Disconnect needs a container server started WithNetwork: %w", ErrUnsupported)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ips[n.Name]; !ok {
		return fmt.Errorf("testkit: %s is not on network %s: %w", s.Addr, n.Name, ErrUnsupported)
	}
	octx, cancel := context.WithTimeout(ctx, containerOpTimeout)
	defer cancel()
	if _, err := c.cli.NetworkDisconnect(octx, n.id, client.NetworkDisconnectOptions{Container: c.id, Force: true}); err != nil {
		return fmt.Errorf("testkit: disconnecting %.12s from %s: %w", c.id, n.Name, err)
	}
	if c.cut == nil {
		c.cut = map[string]bool{}
	}
	c.cut[n.Name] = true
	return nil
}

// Reconnect ends a Disconnect: the server joins n again with the address it had.
func (s *Server) Reconnect(ctx context.Context, n *Network) error {
	c, ok := s.inst.(*ctr)
	if !ok || c.ips == nil {
		return fmt.Errorf("testkit: Reconnect needs a container server started WithNetwork: %w", ErrUnsupported)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ip, ok := c.ips[n.Name]
	if !ok {
		return fmt.Errorf("testkit: %s is not on network %s: %w", s.Addr, n.Name, ErrUnsupported)
	}
	octx, cancel := context.WithTimeout(ctx, containerOpTimeout)
	defer cancel()
	if _, err := c.cli.NetworkConnect(octx, n.id, client.NetworkConnectOptions{
		Container:      c.id,
		EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}},
	}); err != nil {
		return fmt.Errorf("testkit: reconnecting %.12s to %s: %w", c.id, n.Name, err)
	}
	delete(c.cut, n.Name)
	return nil
}

// MustDisconnect is Disconnect failing t on error.
func (s *Server) MustDisconnect(t testing.TB, n *Network) {
	t.Helper()
	if err := s.Disconnect(context.Background(), n); err != nil {
		t.Fatalf("%v", err)
	}
}

// MustReconnect is Reconnect failing t on error.
func (s *Server) MustReconnect(t testing.TB, n *Network) {
	t.Helper()
	if err := s.Reconnect(context.Background(), n); err != nil {
		t.Fatalf("%v", err)
	}
}
