package faults_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// numClients is how many clients (as if separate processes) share the target; each reaches every
// server process through proxies of its own, so a network fault hits one client only.
const numClients = 4

// target is one running matrix target with its clients and their proxies.
type target struct {
	*matrix.Env
	clients []*faultClient
}

type faultClient struct {
	proxies []*testkit.Proxy // one per server process, in Env.Nodes order
	c       rueidis.Client
}

func startTarget(t *testing.T, mt matrix.Target) *target {
	t.Helper()
	tg := &target{Env: matrix.StartEnv(t, mt)}
	for range numClients {
		fc := &faultClient{}
		route := map[string]string{}
		for _, n := range tg.Nodes {
			p := testkit.NewProxy(t, n.Addr)
			fc.proxies = append(fc.proxies, p)
			route[n.Addr] = p.Addr
		}
		opt := tg.ClientOption()
		// One connection per server: a connection rueidis dialed lazily while replies are dropped
		// would hang in its handshake (see testkit.Proxy.ClientOption).
		opt.PipelineMultiplex = -1
		opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			if p, ok := route[dst]; ok {
				dst = p
			}
			return d.DialContext(ctx, "tcp", dst)
		}
		c, err := luakit.NewTrackedClient(opt, luakit.NewTracker())
		if err != nil {
			t.Fatalf("client through proxies: %v", err)
		}
		t.Cleanup(c.Close)
		fc.c = c
		tg.clients = append(tg.clients, fc)
	}
	return tg
}

func (tg *target) client(i int) rueidis.Client { return tg.clients[i%numClients].c }

func (tg *target) pauseNode(i int) error  { return tg.Nodes[i].Pause() }
func (tg *target) resumeNode(i int) error { return tg.Nodes[i].Resume() }

func (tg *target) proxyFault(client int, kind faultKind, delay time.Duration) error {
	var errs []error
	for _, p := range tg.clients[client].proxies {
		switch kind {
		case faultLatency:
			errs = append(errs, p.AddLatency(delay))
		case faultDrop:
			errs = append(errs, p.DropReplies())
		case faultCut:
			errs = append(errs, p.CutConnections())
		case faultRefuse:
			errs = append(errs, p.Refuse())
		}
	}
	return errors.Join(errs...)
}

func (tg *target) healClient(client int, kind faultKind) error {
	var errs []error
	for _, p := range tg.clients[client].proxies {
		if kind == faultRefuse {
			errs = append(errs, p.Accept())
		} else {
			errs = append(errs, p.Reset())
		}
	}
	return errors.Join(errs...)
}

// healAll resumes every server process and clears every proxy fault.
func (tg *target) healAll() error {
	var errs []error
	for _, n := range tg.Nodes {
		errs = append(errs, n.Resume())
	}
	for _, c := range tg.clients {
		for _, p := range c.proxies {
			errs = append(errs, p.Accept(), p.Reset())
		}
	}
	return errors.Join(errs...)
}
