package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// Key placements of the cluster section.
const (
	onePrimary   = "1-primary"
	allPrimaries = "all-primaries"
)

// clusterSection measures Coordkit's lock cycles on a testkit cluster of the same target through one
// cluster client, with every key's slot on one primary and with keys spread over all primaries,
// rounds alternating; the server work is summed over the primaries.
func (r *runner) clusterSection(ctx context.Context, rep *peers.Report) (*peers.Cluster, error) {
	cl, err := testkit.LaunchCluster(ctx, r.cfg.target)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	logf(r.out, "cluster: %s", cl)
	if rep.Server.Version == "" {
		rep.Server = peers.ServerInfo{Target: string(r.cfg.target), Flavor: string(cl.Flavor), Version: cl.Version, Backend: cl.Nodes[0].Backend}
	}
	owner, err := slotOwners(ctx, cl.Nodes[0])
	if err != nil {
		return nil, err
	}
	var primaries []string
	seen := map[string]bool{}
	for _, a := range owner {
		if !seen[a] {
			seen[a] = true
			primaries = append(primaries, a)
		}
	}
	r.nodes = nil
	for _, n := range cl.Nodes {
		if seen[n.Addr] {
			r.nodes = append(r.nodes, n)
		}
	}
	defer r.cleanup(ctx)
	l, err := contenders.NewCoordkitLock(contenders.Server{Option: cl.ClientOption()})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	first := owner[0]
	cycle := func(placement string) op {
		key := r.keyer("c")
		return func(ctx context.Context, n int64) error {
			// Both placements compute the slot of each candidate, so the client does the same work.
			for j := int64(0); ; j++ {
				k := key(n*64 + j)
				lease, _ := lock.Keys(k)
				if placement == allPrimaries || owner[testkit.KeySlot(lease)] == first {
					return l.TryAcquireRelease(ctx, k)
				}
			}
		}
	}
	placements := []string{onePrimary, allPrimaries}
	for _, p := range placements {
		if _, err := r.measure(ctx, r.cfg.clusterCallers, r.cfg.warmup, cycle(p)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	samples := map[string][]peers.Sample{}
	for round := range r.cfg.rounds {
		for _, p := range peers.Rotate(placements, round) {
			s, err := r.measure(ctx, r.cfg.clusterCallers, r.cfg.duration, cycle(p))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			samples[p] = append(samples[p], s)
		}
		logf(r.out, "cluster: round %d/%d done", round+1, r.cfg.rounds)
	}
	res := &peers.Cluster{Contender: contenders.Coordkit, Primaries: len(primaries), Version: cl.Version}
	for _, p := range placements {
		res.Rows = append(res.Rows, peers.Summarize(contenders.Coordkit, p, r.cfg.clusterCallers, samples[p]))
	}
	res.MeasuredScale = peers.Ratio(res.Rows[1].OpsPerSec, res.Rows[0].OpsPerSec)
	title := "Cluster (" + strconv.Itoa(len(primaries)) + " primaries, " + cl.Version + "): Coordkit lock cycles, keys on one primary vs on all; all-primaries/1-primary = " +
		strconv.FormatFloat(res.MeasuredScale, 'f', 2, 64)
	return res, peers.WriteThroughput(r.out, title, "cycles/s", "-", "-", res.Rows)
}

// slotOwners returns the address (host:port) of the primary owning each slot, from CLUSTER SLOTS on
// node.
func slotOwners(ctx context.Context, node *testkit.Server) ([]string, error) {
	m, err := node.Do(ctx, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	ranges, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	owner := make([]string, testkit.ClusterSlots)
	for _, rg := range ranges {
		f, err := rg.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: malformed range")
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		p, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(p) < 2 || lo < 0 || hi >= testkit.ClusterSlots || lo > hi {
			return nil, fmt.Errorf("CLUSTER SLOTS: malformed range")
		}
		host, _ := p[0].ToString()
		port, _ := p[1].AsInt64()
		for s := lo; s <= hi; s++ {
			owner[s] = host + ":" + strconv.FormatInt(port, 10)
		}
	}
	for s, a := range owner {
		if a == "" {
			return nil, fmt.Errorf("CLUSTER SLOTS: slot %d has no owner", s)
		}
	}
	return owner, nil
}
