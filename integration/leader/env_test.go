package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// Short timings so scenarios take seconds: a 1s lease renewed every 500ms, self-fenced 200ms before
// its local deadline (so a renewal has 300ms and a retry before the leader steps down, on a loaded
// 2-core machine under -race), and a 100ms retry delay.
const (
	leaseDuration = time.Second
	safetyMargin  = 200 * time.Millisecond
	retryDelay    = 100 * time.Millisecond
	// slack bounds scheduling and network latency in the generous failover bounds (-race, 2 cores).
	slack = 2 * time.Second
)

// env is one running target shared by its scenarios, which run one after another, each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// trackedClient returns a new tracker-wired client of the target, closed at t.Cleanup (closing twice is
// harmless).
func (e *env) trackedClient(t *testing.T, mutate ...func(*rueidis.ClientOption)) (rueidis.Client, *luakit.Tracker) {
	t.Helper()
	tr := luakit.NewTracker()
	return e.NewClient(t, tr, mutate...), tr
}

// counter returns the fence counter's value (0 when absent).
func (e *env) counter(t *testing.T, key string) int64 {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	require.NoError(t, err)
	return v
}

// requireReleased asserts the state an election leaves after every candidate stopped: no lease, and a
// persistent counter at least at the highest token seen.
func (e *env) requireReleased(t *testing.T, leaseKey, fenceKey string, maxToken int64) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "lease key must be released")
	if maxToken > 0 {
		require.GreaterOrEqual(t, e.counter(t, fenceKey), maxToken, "fence counter")
		require.EqualValues(t, -1, e.PTTL(t, fenceKey), "fence counter must not expire")
	}
}

// election returns the name of one scenario's election ("ck:leader:" + scenario) and the two keys the
// election derives from it (lock.Keys: one hash tag), for inspecting the server state.
func election(scenario string) (name, leaseKey, fenceKey string) {
	name = "ck:leader:" + scenario
	leaseKey, fenceKey = lock.Keys(name)
	return name, leaseKey, fenceKey
}

// event is one term change observed by a candidate's callbacks, timed on this process's monotonic clock.
type event struct {
	candidate int
	token     int64
	elected   time.Time
	revoked   time.Time // zero until OnRevoked ran
	cause     error
}

// recorder collects the terms of every candidate and checks that at most one callback is active.
type recorder struct {
	mu       sync.Mutex
	terms    []*event
	leaders  int
	maxSeen  int
	violated bool
	// early holds OnRevoked calls that ran before the term's OnElected body recorded the term (both
	// run on their own goroutines; a term revoked at once, e.g. on shutdown, can race).
	early map[int64]revocation
}

type revocation struct {
	at    time.Time
	cause error
}

func (r *recorder) elected(cand int, term leader.Term) *event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaders++
	r.maxSeen = max(r.maxSeen, r.leaders)
	if r.leaders > 1 {
		r.violated = true
	}
	ev := &event{candidate: cand, token: term.FencingToken, elected: time.Now()}
	if rv, ok := r.early[term.FencingToken]; ok {
		ev.revoked, ev.cause = rv.at, rv.cause
		delete(r.early, term.FencingToken)
	}
	r.terms = append(r.terms, ev)
	return ev
}

func (r *recorder) finished() {
	r.mu.Lock()
	r.leaders--
	r.mu.Unlock()
}

func (r *recorder) revoked(term leader.Term) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for _, ev := range r.terms {
		if ev.token == term.FencingToken {
			found = true
			if ev.revoked.IsZero() {
				ev.revoked = now
				ev.cause = term.Err()
			}
		}
	}
	if !found {
		if r.early == nil {
			r.early = map[int64]revocation{}
		}
		r.early[term.FencingToken] = revocation{at: now, cause: term.Err()}
	}
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]event, len(r.terms))
	for i, ev := range r.terms {
		out[i] = *ev
	}
	return out
}

// candidate is one election participant with its own client and metrics.
type candidate struct {
	id     int
	client rueidis.Client
	el     *leader.Election
	reader *sdkmetric.ManualReader
	done   chan error
	cancel context.CancelFunc
}

// hold is an elected callback that keeps leadership until revocation.
func hold(ctx context.Context, _ leader.Term) error {
	<-ctx.Done()
	return ctx.Err()
}

// newCandidate builds a candidate whose callbacks report to rec; work is the elected callback body
// (hold when nil).
func newCandidate(t *testing.T, e *env, id int, name string, rec *recorder,
	work func(ctx context.Context, term leader.Term) error, opts ...leader.Option) *candidate {
	t.Helper()
	c, tr := e.trackedClient(t)
	return newCandidateWith(t, c, tr, id, name, rec, work, opts...)
}

// newCandidateWith builds a candidate over a given tracker-wired client, passing leader.WithTracker(tr)
// unless tr is nil (then the election finds the tracker of a NewTrackedClient client itself).
func newCandidateWith(t *testing.T, c rueidis.Client, tr *luakit.Tracker, id int, name string, rec *recorder,
	work func(ctx context.Context, term leader.Term) error, opts ...leader.Option) *candidate {
	t.Helper()
	if work == nil {
		work = hold
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var tracking []leader.Option
	if tr != nil {
		tracking = append(tracking, leader.WithTracker(tr))
	}
	all := append(append([]leader.Option{
		leader.WithLeaseDuration(leaseDuration),
		leader.WithSafetyMargin(safetyMargin),
		leader.WithRetryDelay(retryDelay),
	}, tracking...), []leader.Option{
		leader.WithMeterProvider(mp),
		leader.OnElected(func(ctx context.Context, term leader.Term) error {
			rec.elected(id, term)
			defer rec.finished()
			return work(ctx, term)
		}),
		leader.OnRevoked(rec.revoked),
	}...)
	all = append(all, opts...)
	el, err := leader.New(c, name, all...)
	require.NoError(t, err)
	require.Equal(t, name, el.Name())
	return &candidate{id: id, client: c, el: el, reader: reader}
}

func (c *candidate) start() {
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan error, 1)
	go func() { c.done <- c.el.Run(rctx) }()
}

// stop cancels the candidate's Run and returns its result.
func (c *candidate) stop(t *testing.T) error {
	t.Helper()
	c.cancel()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("candidate %d: Run did not return", c.id)
		return nil
	}
}

// metric sums the int64 data points of name whose state attribute is state ("" for any).
func (c *candidate) metric(t *testing.T, name, state string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, c.reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value("state")
				if state == "" || v.AsString() == state {
					n += dp.Value
				}
				for _, kv := range dp.Attributes.ToSlice() {
					if kv.Key != "state" {
						panic("unexpected metric attribute " + string(kv.Key))
					}
				}
			}
		}
	}
	return n
}

// waitFor polls cond (a test observation, not the code under test) until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// currentLeader returns the index of the candidate whose Current reports a term, or -1.
func currentLeader(cs []*candidate) (int, leader.Term) {
	for i, c := range cs {
		if term, ok := c.el.Current(); ok {
			return i, term
		}
	}
	return -1, leader.Term{}
}

// isClosing reports whether err comes from a closed client.
func isClosing(err error) bool { return errors.Is(err, rueidis.ErrClosing) }

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx
