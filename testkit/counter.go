package testkit

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// CommandCounter counts the commands a server executed since a snapshot, from INFO commandstats
// deltas, so that tests can assert the round trips of an operation.
//
// The counts are server-wide: every client of the server contributes, including rueidis'
// background PING on a connection idle for Dialer.KeepAlive (1s by default; a negative
// KeepAlive turns it off), the handshake of a connection a client dials lazily (HELLO, CLIENT
// TRACKING...; a rueidis single-node client spreads commands over 4 connections unless
// PipelineMultiplex is -1) and a cluster's or replica's internal traffic. testkit's own admin
// client (Server.Do) sends no background PING. The INFO commands the counter itself sends are
// excluded: "info" never appears in Delta or Total (so INFO calls of the code under test are
// not counted either). On a cluster, give it a node's client: INFO on a cluster client reaches
// one arbitrary node.
type CommandCounter struct {
	c    rueidis.Client
	mu   sync.Mutex
	base map[string]int64
}

// NewCommandCounter takes the first snapshot (one INFO commandstats on c, bounded by ctx).
func NewCommandCounter(ctx context.Context, c rueidis.Client) (*CommandCounter, error) {
	base, err := CommandStats(ctx, c)
	if err != nil {
		return nil, err
	}
	return &CommandCounter{c: c, base: base}, nil
}

// Delta returns the calls per command (lower case, sub-commands as "client|id", as CommandStats)
// since the snapshot, without "info" and without commands with no new calls. It does not move
// the snapshot (see Reset). A server restart (counters back to zero) shows as missing or smaller
// counts; negative deltas are dropped.
func (cc *CommandCounter) Delta(ctx context.Context) (map[string]int64, error) {
	now, err := CommandStats(ctx, cc.c)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := map[string]int64{}
	for k, v := range now {
		if k == "info" {
			continue
		}
		if d := v - cc.base[k]; d > 0 {
			out[k] = d
		}
	}
	return out, nil
}

// Total returns the sum of Delta: the commands executed since the snapshot, INFO excluded.
func (cc *CommandCounter) Total(ctx context.Context) (int64, error) {
	d, err := cc.Delta(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, v := range d {
		n += v
	}
	return n, nil
}

// Reset takes a new snapshot: later deltas count from now.
func (cc *CommandCounter) Reset(ctx context.Context) error {
	now, err := CommandStats(ctx, cc.c)
	if err != nil {
		return err
	}
	cc.mu.Lock()
	cc.base = now
	cc.mu.Unlock()
	return nil
}
