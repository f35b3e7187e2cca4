package replicaack_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
	"github.com/coordkit/coordkit/testkit"
)

// ack is what every test asks for: one replica, within 100ms.
var ack = luakit.ReplicaAck{Replicas: 1, Timeout: 100 * time.Millisecond}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// grant takes one hold of a primitive on name with the acknowledgement a (zero: none) and returns
// its release.
type grant func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (release func(), err error)

// primitive is one row of the table: a name and how to take its hold.
type primitive struct {
	name string
	// needs, when set, names a feature the server must have for the row to apply.
	needs *luakit.Feature
	grant grant
}

func release[T interface {
	Release(context.Context) (ownership.Outcome, error)
}](t *testing.T, h T) func() {
	return func() { _, err := h.Release(ctx(t)); require.NoError(t, err) }
}

var primitives = []primitive{
	{name: "lock", grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		lk, err := lock.New(c, lock.WithReplicaAck(a))
		require.NoError(t, err)
		l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
		if err != nil {
			return nil, err
		}
		return release(t, l), nil
	}},
	{name: "fair lock", grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		lk, err := lock.NewFair(c, lock.WithReplicaAck(a))
		require.NoError(t, err)
		l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
		if err != nil {
			return nil, err
		}
		return release(t, l), nil
	}},
	{name: "lease", needs: &luakit.HashFieldTTL, grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		ls, err := lease.New(c, lease.WithReplicaAck(a))
		require.NoError(t, err)
		l, err := ls.TryAcquire(ctx(t), name, "field", 10*time.Second)
		if err != nil {
			return nil, err
		}
		return release(t, l), nil
	}},
	{name: "rwlock write", grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		lk, err := rwlock.New(c, rwlock.WithReplicaAck(a))
		require.NoError(t, err)
		l, err := lk.TryAcquireWrite(ctx(t), name, 10*time.Second)
		if err != nil {
			return nil, err
		}
		return release(t, l), nil
	}},
	{name: "semaphore", grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		s, err := semaphore.New(c, name, 1, semaphore.WithReplicaAck(a))
		require.NoError(t, err)
		p, err := s.TryAcquire(ctx(t), 10*time.Second)
		if err != nil {
			return nil, err
		}
		return release(t, p), nil
	}},
	{name: "idempotency claim", grant: func(t *testing.T, c rueidis.Client, a luakit.ReplicaAck, name string) (func(), error) {
		s, err := idempotency.New(c, idempotency.WithReplicaAck(a))
		require.NoError(t, err)
		at, err := s.TryBegin(ctx(t), name, 10*time.Second, idempotency.Fingerprint{})
		if err != nil {
			return nil, err
		}
		if at.State != idempotency.Started {
			return nil, fmt.Errorf("claim state %v: %w", at.State, luakit.ErrNotAcquired)
		}
		return func() {
			ok, err := s.Abandon(ctx(t), name, at.OwnerToken)
			require.NoError(t, err)
			require.True(t, ok)
		}, nil
	}},
}

// applies reports whether p's server has what the row needs.
func applies(t *testing.T, c rueidis.Client, p primitive) bool {
	if p.needs == nil {
		return true
	}
	ok, err := luakit.Probe(ctx(t), c, *p.needs)
	require.NoError(t, err)
	if !ok {
		t.Logf("%s: not applicable: the server lacks %s", p.name, p.needs.Name)
	}
	return ok
}

// requireNotAcknowledged asserts err is an AckError with 0 of 1 replicas.
func requireNotAcknowledged(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, luakit.ErrNotAcknowledged)
	var ae *luakit.AckError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.EqualValues(t, 0, ae.Replicas, "replicas that acknowledged")
	assert.Equal(t, ack, ae.Ack)
}

// TestReplicaAckRefusesUnreplicatedGrant: with the acknowledgement on and the replication stream
// held, every primitive's acquisition fails with ErrNotAcknowledged (0 of 1 replicas) and leaves
// nothing held: an acquisition without the acknowledgement gets the hold at once. Once replication
// flows again, the acknowledged acquisition succeeds.
func TestReplicaAckRefusesUnreplicatedGrant(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		g := matrix.StartEnv(t, st).Sentinel
		c := g.Client(t, matrix.NoCache)
		for _, p := range primitives {
			if !applies(t, c, p) {
				continue
			}
			t.Run(p.name, func(t *testing.T) {
				name := "ack:refused:" + p.name
				require.NoError(t, g.WaitSync(ctx(t)))
				require.NoError(t, g.HoldReplication())
				rel, err := p.grant(t, c, ack, name)
				require.Nil(t, rel)
				requireNotAcknowledged(t, err)

				rel, err = p.grant(t, c, luakit.ReplicaAck{}, name)
				require.NoError(t, err, "the unacknowledged hold was given back")
				rel()

				require.NoError(t, g.ReleaseReplication())
				require.NoError(t, g.WaitSync(ctx(t)))
				rel, err = p.grant(t, c, ack, name)
				require.NoError(t, err, "acknowledged once replication flows")
				rel()
			})
		}
	})
}

// renewable is the part of every handle that the renewal test uses.
type renewable interface {
	Extend(ctx context.Context) (bool, error)
	Deadline() time.Time
	Close() error
}

// TestReplicaAckRenewal: for every handle kind that renews through the ownership core (lock, fair
// lock, lease where hash-field expiry exists, rwlock, semaphore), a renewal that the replica does not
// acknowledge fails with ErrNotAcknowledged and leaves the handle's local estimate where the
// acknowledged acquisition put it; once replication flows a renewal moves it.
func TestReplicaAckRenewal(t *testing.T) {
	type kind struct {
		name  string
		needs *luakit.Feature
		take  func(t *testing.T, c rueidis.Client) renewable
	}
	kinds := []kind{
		{name: "lock", take: func(t *testing.T, c rueidis.Client) renewable {
			lk, err := lock.New(c, lock.WithReplicaAck(ack))
			require.NoError(t, err)
			l, err := lk.TryAcquire(ctx(t), "ack:renewal:lock", 10*time.Second)
			require.NoError(t, err)
			return l
		}},
		{name: "fair lock", take: func(t *testing.T, c rueidis.Client) renewable {
			lk, err := lock.NewFair(c, lock.WithReplicaAck(ack))
			require.NoError(t, err)
			l, err := lk.TryAcquire(ctx(t), "ack:renewal:fair", 10*time.Second)
			require.NoError(t, err)
			return l
		}},
		{name: "lease", needs: &luakit.HashFieldTTL, take: func(t *testing.T, c rueidis.Client) renewable {
			ls, err := lease.New(c, lease.WithReplicaAck(ack))
			require.NoError(t, err)
			l, err := ls.TryAcquire(ctx(t), "ack:renewal:lease", "field", 10*time.Second)
			require.NoError(t, err)
			return l
		}},
		{name: "rwlock read", take: func(t *testing.T, c rueidis.Client) renewable {
			lk, err := rwlock.New(c, rwlock.WithReplicaAck(ack))
			require.NoError(t, err)
			l, err := lk.TryAcquireRead(ctx(t), "ack:renewal:rw", 10*time.Second)
			require.NoError(t, err)
			return l
		}},
		{name: "semaphore", take: func(t *testing.T, c rueidis.Client) renewable {
			s, err := semaphore.New(c, "ack:renewal:sem", 2, semaphore.WithReplicaAck(ack))
			require.NoError(t, err)
			p, err := s.TryAcquire(ctx(t), 10*time.Second)
			require.NoError(t, err)
			return p
		}},
	}
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		g := matrix.StartEnv(t, st).Sentinel
		c := g.Client(t, matrix.NoCache)
		for _, k := range kinds {
			if !applies(t, c, primitive{name: k.name, needs: k.needs}) {
				continue
			}
			t.Run(k.name, func(t *testing.T) {
				require.NoError(t, g.WaitSync(ctx(t)))
				h := k.take(t, c)
				defer h.Close()
				before := h.Deadline()
				require.NoError(t, g.HoldReplication())
				ok, err := h.Extend(ctx(t))
				require.False(t, ok)
				requireNotAcknowledged(t, err)
				require.Equal(t, before, h.Deadline(), "an unacknowledged renewal does not move the estimate")

				require.NoError(t, g.ReleaseReplication())
				require.NoError(t, g.WaitSync(ctx(t)))
				ok, err = h.Extend(ctx(t))
				require.NoError(t, err)
				require.True(t, ok)
				require.True(t, h.Deadline().After(before), "an acknowledged renewal moves the estimate")
			})
		}
	})
}

// TestReplicaAckFailoverKeepsTokens is TestLockSentinelFailover (integration/lock) with the
// acknowledgement on: tokens 1-3 are acknowledged; while replication is held the 4th acquisition is
// refused (its INCR is on the old primary only, and nobody got its token); after the Sentinels fail
// over, the next acknowledged acquisition gets a token above 3 (without the acknowledgement it is 4
// a second time), so every token returned to a caller was returned once and in increasing order.
func TestReplicaAckFailoverKeepsTokens(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		g := matrix.StartEnv(t, st).Sentinel
		c := g.Client(t, matrix.NoCache)
		lk, err := lock.New(c, lock.WithReplicaAck(ack))
		require.NoError(t, err)
		const name = "ack:failover"
		var issued []int64
		for range 3 {
			l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
			require.NoError(t, err)
			issued = append(issued, l.FencingToken())
			_, err = l.Release(ctx(t))
			require.NoError(t, err)
		}
		require.NoError(t, g.HoldReplication())
		_, err = lk.TryAcquire(ctx(t), name, 10*time.Second)
		requireNotAcknowledged(t, err)

		_, err = g.Failover(ctx(t))
		require.NoError(t, err)
		// Until the Sentinels' switch message moves the client it may still reach the old primary,
		// where every acquisition is refused (its former replica no longer acknowledges it).
		var l *lock.Lease
		require.Eventually(t, func() bool {
			l, err = lk.TryAcquire(ctx(t), name, 10*time.Second)
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "an acknowledged acquisition on the new primary: %v", err)
		issued = append(issued, l.FencingToken())
		_, _ = l.Release(ctx(t))
		// Refused attempts still take a token from the counter (on whichever primary ran them), so
		// the token after the failover is 4 or more; it is never one returned before.
		require.Equal(t, []int64{1, 2, 3}, issued[:3])
		assert.Greater(t, issued[3], issued[2], "every token returned once, in increasing order: %v", issued)
	})
}

// TestReplicaAckClusterRouting: on a Cluster with one replica per primary, each acquisition's WAIT
// reaches the primary that ran its script: with one primary's replica paused, acquisitions of keys in
// that primary's slots are refused (0 of 1 replicas) while keys on the other primaries are granted.
func TestReplicaAckClusterRouting(t *testing.T) {
	clusters := matrix.Select(matrix.Targets(), func(mt matrix.Target) bool { return mt.Cluster })
	matrix.Run(t, clusters, func(t *testing.T, mt matrix.Target) {
		cl := testkit.StartCluster(t, mt.Server, testkit.WithReplicas(1))
		c := cl.Client(t, matrix.NoCache)
		lk, err := lock.New(c, lock.WithReplicaAck(ack))
		require.NoError(t, err)
		// One name per primary: lock names hash to their slots through the lease key's hash tag.
		byPrimary := map[*testkit.Server]string{}
		for i := 0; len(byPrimary) < 3 && i < 1000; i++ {
			name := fmt.Sprintf("ack:route:%d", i)
			l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
			require.NoError(t, err, "every replica acknowledges")
			p, err := cl.PrimaryOf(ctx(t), testkit.KeySlot(l.LeaseKey()))
			require.NoError(t, err)
			_, err = l.Release(ctx(t))
			require.NoError(t, err)
			if _, ok := byPrimary[p]; !ok {
				byPrimary[p] = name
			}
		}
		require.Len(t, byPrimary, 3)
		paused := cl.Nodes[0]
		var replica *testkit.Server
		for k, n := range cl.Nodes[:3] {
			if n == paused {
				replica = cl.Nodes[3+k]
			}
		}
		require.NotNil(t, replica)
		require.NoError(t, replica.Pause())
		defer func() { require.NoError(t, replica.Resume()) }()
		for p, name := range byPrimary {
			l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
			if p == paused {
				requireNotAcknowledged(t, err)
				continue
			}
			require.NoError(t, err, "a primary whose replica runs acknowledges")
			_, err = l.Release(ctx(t))
			require.NoError(t, err)
		}
	})
}

// TestReplicaAckFairHandOff: a fair lock's release writes the waiter's grant on the releasing
// client's connection, so the waiter acknowledges it by renewing once. With replication held the
// renewal is not acknowledged: the waiter's Acquire fails with ErrNotAcknowledged, gives the lease
// back, and the lock is free. Once replication flows the hand-off is acknowledged and granted.
func TestReplicaAckFairHandOff(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		g := matrix.StartEnv(t, st).Sentinel
		c := g.Client(t, matrix.NoCache)
		fl, err := lock.NewFair(c, lock.WithReplicaAck(ack))
		require.NoError(t, err)
		for _, held := range []bool{true, false} {
			name := fmt.Sprintf("ack:fair:%v", held)
			holder, err := fl.TryAcquire(ctx(t), name, 10*time.Second)
			require.NoError(t, err)
			type result struct {
				l   *lock.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := fl.Acquire(ctx(t), name, 10*time.Second)
				got <- result{l, err}
			}()
			require.Eventually(t, func() bool {
				in, err := fl.Inspect(ctx(t), name)
				return err == nil && in.Queued == 1
			}, 10*time.Second, 10*time.Millisecond, "the waiter queues")
			if held {
				require.NoError(t, g.HoldReplication())
			}
			_, err = holder.Release(ctx(t))
			require.NoError(t, err)
			r := <-got
			if held {
				require.Nil(t, r.l)
				requireNotAcknowledged(t, r.err)
				require.NoError(t, g.ReleaseReplication())
				require.NoError(t, g.WaitSync(ctx(t)))
				l, err := fl.TryAcquire(ctx(t), name, 10*time.Second)
				require.NoError(t, err, "the unacknowledged hand-off was given back")
				_, err = l.Release(ctx(t))
				require.NoError(t, err)
				continue
			}
			require.NoError(t, r.err, "an acknowledged hand-off")
			assert.Greater(t, r.l.FencingToken(), holder.FencingToken())
			_, err = r.l.Release(ctx(t))
			require.NoError(t, err)
		}
	})
}
