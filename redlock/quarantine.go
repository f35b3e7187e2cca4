package redlock

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// quarantine is a group's view of when each node's server started, learned from the run_id and
// uptime_in_seconds that every acquisition script returns while the quarantine is on (acquire.lua).
// It is safe for concurrent use.
type quarantine struct {
	longest atomic.Int64 // nanoseconds: the longest TTL the group has requested

	mu    sync.Mutex
	nodes []nodeRun // indexed by node
}

// nodeRun is what the group knows about one node's current server process.
type nodeRun struct {
	runID   string    // INFO server run_id of the process; "" before the first reply
	upSince time.Time // local clock (monotonic reading): when the quarantine of this run_id starts
	seen    time.Time // local clock: the latest reply of this run_id
	logged  bool      // the quarantine of this run_id was logged
}

// learn raises the longest requested TTL to ttl.
func (q *quarantine) learn(ttl time.Duration) {
	for {
		cur := q.longest.Load()
		if int64(ttl) <= cur || q.longest.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

// period returns the quarantine: the longest requested TTL, at least floor.
func (q *quarantine) period(floor time.Duration) time.Duration {
	return max(time.Duration(q.longest.Load()), floor)
}

// uptimeSlack is subtracted from a reported uptime_in_seconds: servers compute it from whole seconds
// of the wall clock (now's second minus the start's second), so it can exceed the real uptime by
// just under one second.
const uptimeSlack = time.Second

// observe records node i's reply (run_id, uptime in whole seconds) received at or before at, and
// reports how much of the quarantine period is left for that node (0: its grants count). The first
// reply of a run_id fixes the start of the node's quarantine on the local monotonic clock: at −
// (uptime − 1s), the latest instant the process can have started, or at itself when that is before the
// previous run_id's last reply (a replica promoted in its place, whose uptime says nothing about when
// it took over); later replies of the same run_id do not move it, so a jump of the server's wall clock
// cannot shorten the quarantine. When a node is found in quarantine for the
// first time since its run_id changed, log (when not nil) gets one warning with its address only.
func (q *quarantine) observe(i int, addr, runID string, uptime int64, at time.Time, period time.Duration, log *slog.Logger) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.nodes == nil {
		return period // unreachable: NewGroup sizes nodes
	}
	n := &q.nodes[i]
	if n.runID != runID {
		up := max(time.Duration(uptime)*time.Second-uptimeSlack, 0)
		since := at.Add(-up)
		if n.runID != "" && since.Before(n.seen) {
			// A process that started before the previous one last answered took over (a failover to
			// a replica): it may lack writes since some instant up to now, so quarantine from now.
			since = at
		}
		*n = nodeRun{runID: runID, upSince: since}
	}
	n.seen = at
	left := period - at.Sub(n.upSince)
	if left <= 0 {
		return 0
	}
	if !n.logged && log != nil {
		n.logged = true
		log.Warn("redlock: node restarted recently; its grants do not count towards a quorum until it has been up for the quarantine",
			slog.String("addr", addr), slog.Duration("quarantine", period), slog.Duration("left", left))
	}
	return left
}
