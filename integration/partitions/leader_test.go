package partitions_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
	"github.com/coordkit/coordkit/testkit/fence"
)

// term is what a candidate recorded of one of its terms.
type term struct {
	token    int64
	elected  time.Time
	revoked  time.Time
	cause    error
	writes   int
	rejected int
}

type candidate struct {
	mu    sync.Mutex
	terms []*term
}

func (c *candidate) last() *term {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.terms) == 0 {
		return nil
	}
	return c.terms[len(c.terms)-1]
}

// TestLeaderPartitionedFromServer: one Redis 8 container on two private networks; candidate A
// reaches it through the first, candidate B through the second. A leads; the server is
// partitioned from the first network (A's requests vanish; B still reaches it). A fences itself off
// (its term ends with ErrExpired) before its lease can end on the server, so before B is elected; B's
// term has a larger fencing token; a write A makes afterwards with its old token is rejected by the
// fence that accepted B's.
func TestLeaderPartitionedFromServer(t *testing.T) {
	needContainers(t)
	netA, netB := testkit.NewNetwork(t), testkit.NewNetwork(t)
	srv := testkit.Start(t, testkit.Redis8, testkit.WithNetwork(netA, netB), testkit.WithStartTimeout(60*time.Second))
	t.Logf("server: redis %s at %s (A) and %s (B)", srv.Version, srv.AddrOn(netA), srv.AddrOn(netB))
	const lease = 2 * time.Second
	var record fence.Fence[string]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	run := func(name, addr string) (*candidate, chan error) {
		opt := srv.ClientOption()
		opt.InitAddress = []string{addr}
		tr := luakit.NewTracker()
		c, err := luakit.NewTrackedClient(opt, tr)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		cand := &candidate{}
		el, err := leader.New(c, "{partition}", leader.WithLeaseDuration(lease), leader.WithRetryDelay(100*time.Millisecond),
			leader.OnElected(func(tctx context.Context, tm leader.Term) error {
				rec := &term{token: tm.FencingToken, elected: time.Now()}
				cand.mu.Lock()
				cand.terms = append(cand.terms, rec)
				cand.mu.Unlock()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-tctx.Done():
						cand.mu.Lock()
						rec.revoked, rec.cause = time.Now(), context.Cause(tctx)
						cand.mu.Unlock()
						return nil
					case <-tick.C:
						ok := record.TryWrite(tm.FencingToken, name)
						cand.mu.Lock()
						if ok {
							rec.writes++
						} else {
							rec.rejected++
						}
						cand.mu.Unlock()
					}
				}
			}))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- el.Run(ctx) }()
		return cand, done
	}

	a, doneA := run("A", srv.AddrOn(netA))
	require.Eventually(t, func() bool { return a.last() != nil }, 20*time.Second, 10*time.Millisecond, "A is elected first")
	b, doneB := run("B", srv.AddrOn(netB))
	ta := a.last()
	time.Sleep(lease / 2) // B campaigns; A renews at least once
	require.Nil(t, b.last(), "one leader at a time")

	srv.MustDisconnect(t, netA)
	partitioned := time.Now()
	require.Eventually(t, func() bool { return b.last() != nil }, 30*time.Second, 10*time.Millisecond, "B is elected once A's lease ends")
	tb := b.last()

	a.mu.Lock()
	revoked, cause, writesA := ta.revoked, ta.cause, ta.writes
	a.mu.Unlock()
	require.False(t, revoked.IsZero(), "A's term was revoked")
	assert.ErrorIs(t, cause, luakit.ErrExpired, "A fenced itself off at its local deadline")
	assert.True(t, revoked.Before(tb.elected), "A stepped down before B was elected")
	assert.Less(t, revoked.Sub(partitioned), lease, "A stepped down before its lease could end on the server")
	assert.Greater(t, tb.token, ta.token, "B's fencing token is larger")
	assert.Positive(t, writesA)

	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return tb.writes > 0
	}, 10*time.Second, 10*time.Millisecond, "B writes through the fence")
	assert.False(t, record.TryWrite(ta.token, "A, partitioned and unaware"), "the old leader's write is rejected by the fence")
	v, tok := record.Value()
	assert.Equal(t, "B", v)
	assert.Equal(t, tb.token, tok)

	srv.MustReconnect(t, netA)
	cancel()
	for _, d := range []chan error{doneA, doneB} {
		select {
		case err := <-d:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
	}
}
