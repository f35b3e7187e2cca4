package leader_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/luakit/hooktest"
)

// TestLeaderCampaignsAfterCallbacks: a term that ends by loss (the renewal finds no hold: the lease
// key was deleted) or by self-fencing (no renewal answered before the local deadline: the server is
// paused) is followed by a new campaign only once both of its callbacks returned. While the term's
// OnElected (or OnRevoked) is held on a channel, past the lease duration and the retry delay, the
// election's hook sees no LEADER CAMPAIGN and the fence counter does not move; once it returns, the
// next term comes. Self-fencing pauses the one server, so it runs on standalone targets.
func TestLeaderCampaignsAfterCallbacks(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		for _, end := range []string{"loss", "self_fence"} {
			if end == "self_fence" && mt.Cluster {
				continue
			}
			for _, held := range []string{"OnElected", "OnRevoked"} {
				t.Run(end+"/"+held+"_held", func(t *testing.T) { testCampaignAfterCallbacks(t, e, end, held) })
			}
		}
	})
}

// testCampaignAfterCallbacks ends a term the way end says ("loss" or "self_fence") while the callback
// named by held ("OnElected" or "OnRevoked") does not return, and checks that no campaign starts until it
// does.
func testCampaignAfterCallbacks(t *testing.T, e *env, end, held string) {
	name, leaseKey, fenceKey := election("after-callbacks-" + end + "-" + held)
	rec := &hooktest.Recorder{}
	release := make(chan struct{})
	var releaseOnce atomic.Bool
	unblock := func() {
		if releaseOnce.CompareAndSwap(false, true) {
			close(release)
		}
	}
	elected := make(chan leader.Term, 8)
	var terms, revocations atomic.Int64
	var returned atomic.Bool // the held callback of the first term returned
	opts := []leader.Option{leader.WithHooks(rec)}
	if end == "loss" {
		// Room for the renewal that finds the lease gone to answer before the term would self-fence
		// (at 2.8s; renewals from 1.5s) on a loaded machine. The deleted lease is free at once.
		opts = append(opts, leader.WithLeaseDuration(3*time.Second))
	}
	el := newElection(t, e, nil, name, append(opts,
		leader.OnElected(func(ctx context.Context, term leader.Term) error {
			first := terms.Add(1) == 1
			elected <- term
			<-ctx.Done()
			if first && held == "OnElected" {
				<-release // ignores the revocation
				returned.Store(true)
			}
			return nil
		}),
		leader.OnRevoked(func(leader.Term) {
			if revocations.Add(1) == 1 && held == "OnRevoked" {
				<-release
				returned.Store(true)
			}
		}))...)
	require.NoError(t, el.Start(context.Background()))
	defer func() { // after a failed assertion: let the held callback return, so that Run can
		unblock()
		_ = el.Stop(context.Background())
	}()
	var term leader.Term
	select {
	case term = <-elected:
	case <-time.After(10 * time.Second):
		t.Fatal("not elected")
	}
	require.Equal(t, []string{"admit LEADER CAMPAIGN @", "done LEADER CAMPAIGN succeeded"}, rec.Take())

	switch end {
	case "loss":
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(leaseKey).Build()).Error())
	case "self_fence":
		require.NoError(t, e.Srv.Pause())
		resumed := false
		defer func() {
			if !resumed {
				_ = e.Srv.Resume()
			}
		}()
		waitFor(t, 10*time.Second, "the term to be revoked", func() bool { return term.Err() != nil })
		require.ErrorIs(t, term.Err(), leader.ErrExpired, "self-fenced at the local deadline")
		require.NoError(t, e.Srv.Resume())
		resumed = true
		matrix.WaitServing(t, e.Raw)
	}
	waitFor(t, 10*time.Second, "the term to be revoked", func() bool { return term.Err() != nil })
	if end == "loss" {
		require.ErrorIs(t, term.Err(), leader.ErrLost, "the renewal found no hold")
	}
	waitFor(t, 10*time.Second, "OnRevoked to start", func() bool { return revocations.Load() == 1 })

	// The callback stays held for longer than a campaign needs to win the free (or expired) lease.
	for until := time.Now().Add(leaseDuration + retryDelay + 500*time.Millisecond); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		if log := rec.Take(); slices.Contains(log, "admit LEADER CAMPAIGN @") {
			t.Fatalf("journal %q: a campaign started while the ended term's %s still ran", log, held)
		}
		require.EqualValues(t, 1, terms.Load(), "a new term began while the ended term's %s still ran", held)
		require.Equal(t, term.FencingToken, e.counter(t, fenceKey), "a new lease was acquired while the ended term's %s still ran", held)
	}
	require.False(t, returned.Load())
	unblock()
	var next leader.Term
	select {
	case next = <-elected:
	case <-time.After(leaseDuration + retryDelay + slack):
		t.Fatal("no new term after the callback returned")
	}
	require.Greater(t, next.FencingToken, term.FencingToken)
	require.True(t, returned.Load())
	require.NoError(t, el.Stop(ctx(t)))
	e.requireReleased(t, leaseKey, fenceKey, next.FencingToken)
}
