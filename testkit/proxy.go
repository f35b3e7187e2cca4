package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy between clients and a server, for network faults. It runs in-process
// (github.com/Shopify/toxiproxy/v2: its Proxy and toxics, no HTTP API, no metrics, logging off)
// on a free loopback port. Faults apply to open connections at once and to new ones.
//
// Directions: "requests" flow client → server (toxiproxy's upstream stream), "replies" flow
// server → client (downstream).
type Proxy struct {
	Addr     string // listen address, 127.0.0.1:port; clients connect here
	Upstream string // the server's address

	mu     sync.Mutex
	p      *toxiproxy.Proxy
	closed bool
}

var proxySeq atomic.Int64

// Toxic names used by the helpers.
const (
	toxicLatency     = "testkit_latency"
	toxicDropReplies = "testkit_drop_replies"
)

// LaunchProxy starts a proxy to upstream (host:port) on a free loopback port and returns once it
// listens. It does not dial upstream until a client connects (a client whose upstream dial fails
// is disconnected at once). The caller must Close it.
func LaunchProxy(upstream string) (*Proxy, error) {
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	name := fmt.Sprintf("testkit-%d", proxySeq.Add(1))
	tp := toxiproxy.NewProxy(api, name, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("testkit: starting proxy to %s: %w", upstream, err)
	}
	return &Proxy{Addr: tp.Listen, Upstream: upstream, p: tp}, nil
}

// NewProxy is LaunchProxy for tests: the proxy is closed at t.Cleanup; an error fails the test.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := LaunchProxy(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("testkit: closing proxy: %v", err)
		}
	})
	return p
}

// ClientOption returns single-node client options for the server behind the proxy: InitAddress
// {Addr}, ForceSingleClient, one pipelining connection (PipelineMultiplex -1: rueidis otherwise
// spreads commands over 4 lazily dialed connections, and one dialed after DropReplies would hang
// in its handshake instead of sending the command) and the test defaults of Server.ClientOption
// (dial timeout 3s, ConnWriteTimeout 5s). Only for servers without credentials (process backend).
func (p *Proxy) ClientOption() rueidis.ClientOption {
	opt := rueidis.ClientOption{InitAddress: []string{p.Addr}, ForceSingleClient: true, PipelineMultiplex: -1}
	applyTestDefaults(&opt)
	return opt
}

// Client returns a new client through the proxy (ClientOption, then each mutate), closed at
// t.Cleanup. Make it before adding a fault that stops replies: rueidis dials and handshakes
// (HELLO) when the client is made.
func (p *Proxy) Client(t testing.TB, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	return newTestClient(t, p.ClientOption(), mutate)
}

func (p *Proxy) running() (*toxiproxy.Proxy, error) {
	if p.closed {
		return nil, errors.New("testkit: proxy is closed")
	}
	return p.p, nil
}

// addToxic adds (or replaces) a named toxic with toxicity 1 (every connection).
func (p *Proxy) addToxic(name, typ, stream string, attrs string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp, err := p.running()
	if err != nil {
		return err
	}
	if tp.Toxics.GetToxic(name) != nil {
		if err := tp.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return fmt.Errorf("testkit: proxy: removing %s: %w", name, err)
		}
	}
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := tp.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("testkit: proxy: adding %s toxic: %w", typ, err)
	}
	return nil
}

// AddLatency delays every reply chunk (server → client) by d (millisecond resolution; a d below
// 1ms is 0), on open and new connections; a second call replaces the delay. The delay is at
// least d; scheduling adds to it. Reset removes it. It does not block.
func (p *Proxy) AddLatency(d time.Duration) error {
	return p.addToxic(toxicLatency, "latency", "downstream", fmt.Sprintf(`{"latency":%d,"jitter":0}`, d.Milliseconds()))
}

// DropReplies makes the proxy swallow every byte from the server to the client (toxiproxy's
// "timeout" toxic with timeout 0, downstream) while requests still reach the server. A command
// sent now is executed by the server but its reply never arrives: the client's outcome is
// uncertain (it sees only its own timeout). Connections stay open. Reset stops it and closes every
// connection through the proxy (those whose replies were dropped are no longer consistent byte
// streams; rueidis reconnects on the next command). It does not block.
func (p *Proxy) DropReplies() error {
	return p.addToxic(toxicDropReplies, "timeout", "downstream", `{"timeout":0}`)
}

// CutConnections closes every connection through the proxy (both sides) and listens again on the
// same address, keeping the toxics. A client's in-flight and next commands fail with a connection
// error until it reconnects (rueidis reconnects on the next command). Blocks until the listener
// is back; fails when the address cannot be bound again.
func (p *Proxy) CutConnections() error {
	if err := p.Refuse(); err != nil {
		return err
	}
	return p.Accept()
}

// Refuse closes every connection through the proxy (both sides) and stops listening, so that new
// connections are refused at once (a client's dial fails) until Accept. It does not block.
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp, err := p.running()
	if err != nil {
		return err
	}
	tp.Stop()
	return nil
}

// Accept listens again on the same address after Refuse, keeping the toxics (a no-op when the proxy
// listens). Blocks until the listener is back; fails when the address cannot be bound again.
func (p *Proxy) Accept() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp, err := p.running()
	if err != nil {
		return err
	}
	if err := tp.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("testkit: proxy: listening again on %s: %w", p.Addr, err)
	}
	return nil
}

// Reset removes every toxic (latency, dropped replies); see DropReplies for the connections it
// closes. It does not block beyond flushing data the toxics still hold (bounded by 5s).
func (p *Proxy) Reset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp, err := p.running()
	if err != nil {
		return err
	}
	dropping := tp.Toxics.GetToxic(toxicDropReplies) != nil
	tp.Toxics.ResetToxics(context.Background())
	if dropping {
		// Removing the timeout toxic closes the connections whose replies it swallowed, but a reply
		// that arrives on such a connection afterwards leaves a toxiproxy goroutine blocked for good
		// (goleak caught it). Cutting every connection and listening again ends them all.
		tp.Stop()
		if err := tp.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return fmt.Errorf("testkit: proxy: listening again on %s: %w", p.Addr, err)
		}
	}
	return nil
}

// Close stops listening and closes every connection through the proxy. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.p.Stop()
	return nil
}
