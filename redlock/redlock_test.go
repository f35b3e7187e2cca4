package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

func stubs(n int) []rueidis.Client {
	out := make([]rueidis.Client, n)
	for i := range out {
		out[i] = noIO{ClientMode: rueidis.ClientModeStandalone, ID: i}
	}
	return out
}

func TestNewGroup(t *testing.T) {
	dup := stubs(3)
	dup[2] = dup[0]
	withNil := stubs(3)
	withNil[1] = nil
	withCluster := stubs(5)
	withCluster[3] = noIO{ClientMode: rueidis.ClientModeCluster, ID: 3}
	withSentinel := stubs(3)
	withSentinel[0] = noIO{ClientMode: rueidis.ClientModeSentinel, ID: 0}
	tests := []struct {
		name    string
		clients []rueidis.Client
		opts    []Option
		want    error // nil: success
		quorum  int
	}{
		{"three", stubs(3), nil, nil, 2},
		{"five", stubs(5), nil, nil, 3},
		{"seven", stubs(7), nil, nil, 4},
		{"none", nil, nil, ErrNodeCount, 0},
		{"one", stubs(1), nil, ErrNodeCount, 0},
		{"two", stubs(2), nil, ErrNodeCount, 0},
		{"four", stubs(4), nil, ErrNodeCount, 0},
		{"nil client", withNil, nil, ErrNilClient, 0},
		{"cluster client", withCluster, nil, ErrClusterClient, 0},
		{"sentinel client", withSentinel, nil, nil, 2},
		{"duplicate client", dup, nil, ErrDuplicateClient, 0},
		{"all options", stubs(3), []Option{
			WithNodeTimeout(50 * time.Millisecond), WithDriftFactor(0), WithRetryDelay(time.Millisecond),
			WithKeyPrefix("\x00app{x}:"), WithFencing("fence"), WithLogger(slog.Default()),
			WithRenewFraction(0.9), nil,
		}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGroup(tt.clients, tt.opts...)
			if tt.want != nil {
				if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "redlock: ") {
					t.Fatalf("NewGroup error = %v, want %v", err, tt.want)
				}
				// Every bad argument matches ErrInvalidConfig; a nil client is ErrNilClient.
				if tt.want != ErrNilClient && !errors.Is(err, luakit.ErrInvalidConfig) {
					t.Fatalf("NewGroup error = %v does not match ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewGroup: %v", err)
			}
			if g.Quorum() != tt.quorum || g.Nodes() != len(tt.clients) {
				t.Fatalf("quorum %d of %d, want %d of %d", g.Quorum(), g.Nodes(), tt.quorum, len(tt.clients))
			}
		})
	}
}

func TestOptionsInvalid(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
	}{
		{"zero node timeout", WithNodeTimeout(0)},
		{"negative node timeout", WithNodeTimeout(-time.Second)},
		{"negative drift", WithDriftFactor(-0.1)},
		{"drift too large", WithDriftFactor(0.5)},
		{"drift NaN", WithDriftFactor(math.NaN())},
		{"zero retry delay", WithRetryDelay(0)},
		{"zero cleanup timeout", WithCleanupTimeout(0)},
		{"negative cleanup timeout", WithCleanupTimeout(-time.Second)},
		{"empty fence key", WithFencing("")},
		{"zero renew fraction", WithRenewFraction(0)},
		{"renew fraction too large", WithRenewFraction(0.91)},
		{"renew fraction NaN", WithRenewFraction(math.NaN())},
		{"negative longest TTL", WithLongestTTL(-time.Millisecond)},
		{"ack without timeout", WithReplicaAck(luakit.ReplicaAck{Replicas: 1})},
		{"ack timeout not below the node timeout", WithReplicaAck(luakit.ReplicaAck{Replicas: 1, Timeout: DefaultNodeTimeout})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewGroup(stubs(3), tt.opt); err == nil {
				t.Fatal("NewGroup accepted an invalid option")
			} else if !strings.HasPrefix(err.Error(), "redlock: ") || !errors.Is(err, luakit.ErrInvalidConfig) {
				t.Fatalf("error %q lacks the redlock: prefix or does not match ErrInvalidConfig", err)
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		opts   []Option
		ctx    context.Context
		key    string
		ttl    time.Duration
		want   error
		wantIs error
	}{
		{"empty key", nil, context.Background(), "", time.Second, luakit.ErrEmptyKey, nil},
		{"zero ttl", nil, context.Background(), "k", 0, ErrInvalidTTL, nil},
		{"negative ttl", nil, context.Background(), "k", -time.Second, ErrInvalidTTL, nil},
		{"sub-ms ttl", nil, context.Background(), "k", 999 * time.Microsecond, ErrInvalidTTL, nil},
		{"ttl within drift", nil, context.Background(), "k", 2 * time.Millisecond, ErrInvalidTTL, nil},
		{"ttl within larger drift", []Option{WithDriftFactor(0.4)}, context.Background(), "k", 3 * time.Millisecond, ErrInvalidTTL, nil},
		{"same key as fence", []Option{WithFencing("f")}, context.Background(), "f", time.Second, ErrSameKey, nil},
		{"same key after prefix", []Option{WithKeyPrefix("p:"), WithFencing("f")}, context.Background(), "f", time.Second, ErrSameKey, nil},
		{"cancelled ctx", nil, cancelled, "k", time.Second, context.Canceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGroup(stubs(3), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			l, err := g.TryAcquire(tt.ctx, tt.key, tt.ttl)
			if l != nil || !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "redlock: ") {
				t.Fatalf("TryAcquire = %v, %v; want %v", l, err, tt.want)
			}
			if tt.want != context.Canceled && !errors.Is(err, luakit.ErrInvalidConfig) {
				t.Fatalf("TryAcquire error %v does not match ErrInvalidConfig", err)
			}
			if _, err := g.Acquire(tt.ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) {
				t.Fatalf("Acquire error = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestQuorumError(t *testing.T) {
	e := &QuorumError{Op: "acquire", Needed: 3, Got: 1, Nodes: []NodeError{
		{Index: 0, Addr: "127.0.0.1:1", Err: ErrHeld},
		{Index: 2, Err: errors.Join(ErrUncertain, context.DeadlineExceeded)},
		{Index: 4, Err: &CounterError{Reason: CounterExpiring}},
	}}
	var err error = fmt.Errorf("redlock: acquire: %w", e)
	for _, want := range []error{ErrNoQuorum, ErrNotAcquired, ErrHeld, ErrUncertain, context.DeadlineExceeded, ErrCounter} {
		if !errors.Is(err, want) {
			t.Errorf("errors.Is(%v) = false", want)
		}
	}
	if errors.Is(err, ErrNotOwner) {
		t.Error("errors.Is(ErrNotOwner) = true")
	}
	var ne NodeError
	if !errors.As(err, &ne) || ne.Index != 0 || ne.Addr != "127.0.0.1:1" {
		t.Errorf("errors.As NodeError = %+v", ne)
	}
	var ce *CounterError
	if !errors.As(err, &ce) || ce.Reason != CounterExpiring {
		t.Errorf("errors.As CounterError = %+v", ce)
	}
	msg := err.Error()
	for _, want := range []string{"redlock: acquire: no quorum: 1 of 3 needed nodes confirmed: node 0 (127.0.0.1:1)", "node 2:", "fence counter has an expiry"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// A handle's step that no quorum settled leaves the lock's state unknown: uncertain, never "not
	// acquired".
	for _, op := range []string{"extend", "verify", "release"} {
		qe := &QuorumError{Op: op, Needed: 2, Got: 0, Nodes: []NodeError{{Index: 1, Err: errors.New("boom")}}}
		if errors.Is(qe, ErrNotAcquired) || !errors.Is(qe, ErrNoQuorum) || !errors.Is(qe, ErrUncertain) || !errors.Is(qe, luakit.ErrUncertain) {
			t.Errorf("%s QuorumError must wrap ErrNoQuorum and ErrUncertain only", op)
		}
	}
	// An acquisition whose nodes all answered is not uncertain.
	if held := (&QuorumError{Op: "fence", Nodes: []NodeError{{Err: ErrNotOwner}}}); !errors.Is(held, ErrNotAcquired) || errors.Is(held, ErrUncertain) {
		t.Error("fence QuorumError must wrap ErrNotAcquired, and ErrUncertain only through a node")
	}
}

func TestLateError(t *testing.T) {
	err := error(&lateError{ttl: 100 * time.Millisecond, elapsed: 150 * time.Millisecond, drift: 3 * time.Millisecond})
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, ErrLateReply) || !errors.Is(err, luakit.ErrLateReply) {
		t.Fatalf("%v must wrap ErrNotAcquired and ErrLateReply", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "redlock: acquire: ") || !strings.Contains(msg, "elapsed 150ms") || strings.Contains(msg, "held by another owner") {
		t.Fatalf("message %q", msg)
	}
}

func TestErrorsPrefixed(t *testing.T) {
	for _, err := range []error{
		ErrNoQuorum, ErrHeld, ErrNotOwner, ErrSameKey, ErrNodeCount,
		ErrClusterClient, ErrDuplicateClient,
	} {
		if !strings.HasPrefix(err.Error(), "redlock: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

// TestSharedErrors: the ownership errors are luakit's values, so one errors.Is works across modules.
func TestSharedErrors(t *testing.T) {
	for _, tt := range []struct{ ours, shared error }{
		{ErrNotAcquired, luakit.ErrNotAcquired}, {ErrLateReply, luakit.ErrLateReply},
		{ErrUncertain, luakit.ErrUncertain}, {ErrLost, luakit.ErrLost}, {ErrExpired, luakit.ErrExpired},
		{ErrReleased, luakit.ErrReleased}, {ErrKeepAliveRunning, luakit.ErrKeepAliveRunning},
		{ErrNilClient, luakit.ErrNilClient},
	} {
		if tt.ours != tt.shared {
			t.Errorf("%v is not luakit's value", tt.ours)
		}
	}
	for _, err := range []error{ErrSameKey, ErrNodeCount, ErrClusterClient, ErrDuplicateClient} {
		if !errors.Is(err, luakit.ErrInvalidConfig) {
			t.Errorf("%v does not match ErrInvalidConfig", err)
		}
	}
	// A node's fence key holding data redlock never writes is foreign data.
	for _, tt := range []struct {
		reason  CounterReason
		foreign bool
	}{{CounterWrongType, true}, {CounterMalformed, true}, {CounterNegative, true}, {CounterExpiring, false}, {CounterOverflow, false}} {
		err := error(&CounterError{Reason: tt.reason})
		if errors.Is(err, luakit.ErrForeignData) != tt.foreign || !errors.Is(err, ErrCounter) {
			t.Errorf("CounterError{%s}: ErrForeignData %v, want %v", tt.reason, errors.Is(err, luakit.ErrForeignData), tt.foreign)
		}
	}
	if Released != ownership.Released || AlreadyReleased != ownership.AlreadyReleased || NotOwned != ownership.NotOwned {
		t.Error("release outcomes are not ownership's")
	}
}

// TestVerdict: an extend or verify step holds with a quorum of confirmations, is lost once the
// refusals leave no quorum possible, and is unknown in between.
func TestVerdict(t *testing.T) {
	tests := []struct {
		nodes, confirmed, refused int
		held, known               bool
	}{
		{3, 3, 0, true, true},
		{3, 2, 1, true, true},
		{3, 2, 0, true, true},
		{3, 1, 1, false, false}, // one unknown node could make two
		{3, 1, 2, false, true},
		{3, 0, 2, false, true},
		{3, 0, 1, false, false},
		{3, 0, 0, false, false},
		{5, 3, 2, true, true},
		{5, 2, 2, false, false}, // the fifth node decides
		{5, 2, 3, false, true},
		{5, 1, 2, false, false},
		{5, 0, 3, false, true},
		{5, 0, 5, false, true},
		{7, 3, 3, false, false},
		{7, 3, 4, false, true},
		{7, 4, 0, true, true},
	}
	for _, tt := range tests {
		g, err := NewGroup(stubs(tt.nodes))
		if err != nil {
			t.Fatal(err)
		}
		if held, known := g.verdict(tt.confirmed, tt.refused); held != tt.held || known != tt.known {
			t.Errorf("%d nodes, %d confirmed, %d refused: held %v known %v; want %v %v",
				tt.nodes, tt.confirmed, tt.refused, held, known, tt.held, tt.known)
		}
	}
}

func TestInterpretAcquire(t *testing.T) {
	const run = "9e8b0a7fef71632a7491fecee9f7f17eec4111cc"
	tests := []struct {
		name   string
		code   int64
		rest   []string
		fenced bool
		probe  bool
		want   acquireReply
		err    error
	}{
		{"held", 0, nil, false, false, acquireReply{}, nil},
		{"held fenced probed", 0, nil, true, true, acquireReply{}, nil},
		{"acquired", 1, nil, false, false, acquireReply{granted: true}, nil},
		{"acquired fenced zero", 1, []string{"0"}, true, false, acquireReply{granted: true}, nil},
		{"acquired fenced above 2^53", 1, []string{"9007199254740995"}, true, false, acquireReply{granted: true, counter: 9007199254740995}, nil},
		{"acquired fenced max", 1, []string{"9223372036854775807"}, true, false, acquireReply{granted: true, counter: math.MaxInt64}, nil},
		{"acquired probed", 1, []string{run, "12"}, false, true, acquireReply{granted: true, runID: run, uptime: 12}, nil},
		{"acquired fenced probed", 1, []string{"5", run, "0"}, true, true, acquireReply{granted: true, counter: 5, runID: run}, nil},
		{"probed without run_id", 1, []string{"", "12"}, false, true, acquireReply{}, errMalformedReply},
		{"probed bad uptime", 1, []string{run, "x"}, false, true, acquireReply{}, errMalformedReply},
		{"probed negative uptime", 1, []string{run, "-1"}, false, true, acquireReply{}, errMalformedReply},
		{"probe expected", 1, nil, false, true, acquireReply{}, errMalformedReply},
		{"probe unexpected", 1, []string{run, "1"}, false, false, acquireReply{}, errMalformedReply},
		{"fenced beyond int64", 1, []string{"9223372036854775808"}, true, false, acquireReply{}, ErrCounter},
		{"fenced leading zero", 1, []string{"07"}, true, false, acquireReply{}, ErrCounter},
		{"fenced negative", 1, []string{"-1"}, true, false, acquireReply{}, ErrCounter},
		{"unfenced reply with counter", 1, []string{"0"}, false, false, acquireReply{}, errMalformedReply},
		{"fenced reply without counter", 1, nil, true, false, acquireReply{}, errMalformedReply},
		{"wrongtype", -4, []string{"wrongtype"}, true, false, acquireReply{}, ErrCounter},
		{"expiring", -4, []string{"expiring"}, true, true, acquireReply{}, ErrCounter},
		{"unknown reason", -4, []string{"other"}, true, false, acquireReply{}, errMalformedReply},
		{"unknown code", 2, nil, false, false, acquireReply{}, errMalformedReply},
		{"former counter code", -1, []string{"wrongtype"}, true, false, acquireReply{}, errMalformedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := interpretAcquire(tt.code, tt.rest, tt.fenced, tt.probe)
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("= %+v, %v; want %+v, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzInterpretAcquire(f *testing.F) {
	f.Add(int64(1), "42", "", 2, true, false)
	f.Add(int64(0), "", "", 0, false, false)
	f.Add(int64(-1), "malformed", "", 1, true, false)
	f.Add(int64(1), "9223372036854775808", "", 1, true, false)
	f.Add(int64(1), "abc", "3", 2, false, true)
	f.Fuzz(func(t *testing.T, code int64, a, b string, n int, fenced, probe bool) {
		rest := []string{a, b, "7"}[:min(max(n, 0), 3)]
		got, err := interpretAcquire(code, rest, fenced, probe)
		if got.granted && (err != nil || code != 1 || got.counter < 0 || got.uptime < 0) {
			t.Fatalf("acquired with err=%v code=%d reply=%+v", err, code, got)
		}
		if got.granted && fenced && luakit.FormatInt64(got.counter) != rest[0] {
			t.Fatalf("counter %d does not round-trip %q", got.counter, rest[0])
		}
		if got.granted && probe && got.runID == "" {
			t.Fatalf("probed grant without run_id: %+v", got)
		}
		if !got.granted && got != (acquireReply{}) {
			t.Fatalf("reply %+v without acquisition", got)
		}
	})
}

// testLock returns a Lease over g granted now with ttl (whole milliseconds), as TryAcquire builds it.
func testLock(t *testing.T, g *Group, ttl time.Duration) *Lease {
	t.Helper()
	l := &Lease{name: "k", fence: 7}
	l.b.g, l.b.pkey, l.b.token = g, "k", "token"
	if err := l.own.Grant(context.Background(), &l.b, &g.own, time.Now(), ttl); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLockLocalLifecycle(t *testing.T) {
	g, err := NewGroup(stubs(3))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 80 * time.Millisecond
	before := time.Now()
	l := testLock(t, g, ttl)
	drift := time.Duration(float64(ttl)*DefaultDriftFactor) + DriftConstant // 2.8ms
	if d := l.Deadline(); d.Before(before.Add(ttl-drift)) || d.After(time.Now().Add(ttl-drift)) {
		t.Fatalf("Deadline %v not send time + TTL − drift allowance", d.Sub(before))
	}
	if r := l.Remaining(); r <= 0 || r > ttl-drift {
		t.Fatalf("Remaining = %v", r)
	}
	if l.Err() != nil || l.Name() != "k" || l.FencingToken() != 7 || l.TTL() != ttl {
		t.Fatalf("fresh lock state: err=%v name=%q fence=%d ttl=%v", l.Err(), l.Name(), l.FencingToken(), l.TTL())
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the validity elapsed")
	}
	if !errors.Is(l.Err(), ErrExpired) || !errors.Is(context.Cause(l.Context()), ErrExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	if l.Remaining() != 0 {
		t.Fatalf("Remaining after expiry = %v", l.Remaining())
	}
	// Extend, Verify and KeepAlive on an ended handle do no I/O (the stub clients would panic).
	if ok, err := l.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v", ok, err)
	}
	if ok, err := l.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after expiry = %v, %v", ok, err)
	}
	if err := l.KeepAlive(context.Background()); !errors.Is(err, ErrExpired) {
		t.Fatalf("KeepAlive after expiry = %v", err)
	}
}

// TestLockBeforeIO: a release whose ctx already ended and a renewal with an invalid TTL send nothing
// (the stub clients would panic) and leave the lock as it was.
func TestLockBeforeIO(t *testing.T) {
	g, err := NewGroup(stubs(3))
	if err != nil {
		t.Fatal(err)
	}
	l := testLock(t, g, time.Minute)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if o, err := l.Release(cancelled); o != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Release(cancelled) = %v, %v", o, err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Microsecond, 2 * time.Millisecond} {
		if ok, err := l.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Fatalf("ExtendTTL(%v) = %v, %v", ttl, ok, err)
		}
	}
	// The backend itself still refuses what the nodes would not be sent exactly.
	for _, ttl := range []time.Duration{0, 1500 * time.Microsecond, 2 * time.Millisecond} {
		if ok, err := l.b.Extend(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Fatalf("backend Extend(%v) = %v, %v", ttl, ok, err)
		}
	}
	if l.Err() != nil || l.Remaining() <= 0 || l.TTL() != time.Minute {
		t.Fatalf("lock changed before any I/O: err=%v remaining=%v ttl=%v", l.Err(), l.Remaining(), l.TTL())
	}
}

// fakeNode is a rueidis.Client whose script calls all return reply(ctx) (an error: RedisMessage values
// cannot be built outside rueidis). It counts the calls.
type fakeNode struct {
	rueidis.Client
	id    int
	calls atomic.Int32
	reply func(ctx context.Context) error
}

func (c *fakeNode) Mode() rueidis.ClientMode         { return rueidis.ClientModeStandalone }
func (c *fakeNode) B() rueidis.Builder               { return rueidis.Builder{} }
func (c *fakeNode) Nodes() map[string]rueidis.Client { return nil }
func (c *fakeNode) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	return rueidis.NewErrorResult(c.reply(ctx))
}

func fakeGroup(t *testing.T, n int, reply func(i int, ctx context.Context) error, opts ...Option) (*Group, []*fakeNode) {
	t.Helper()
	nodes := make([]*fakeNode, n)
	clients := make([]rueidis.Client, n)
	for i := range nodes {
		nodes[i] = &fakeNode{id: i, reply: func(ctx context.Context) error { return reply(i, ctx) }}
		clients[i] = nodes[i]
	}
	g, err := NewGroup(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, nodes
}

// TestLockUnsettledSteps: when no quorum settles a step (every node fails) Extend and Verify return an
// uncertain *QuorumError and the lock keeps vouching; Release returns one too, ends the lock, and can
// be sent again.
func TestLockUnsettledSteps(t *testing.T) {
	boom := errors.New("fake: connection reset")
	g, nodes := fakeGroup(t, 3, func(int, context.Context) error { return boom })
	l := testLock(t, g, time.Minute)
	for _, step := range []struct {
		op  string
		run func() (bool, error)
	}{
		{"extend", func() (bool, error) { return l.Extend(context.Background()) }},
		{"verify", func() (bool, error) { return l.Verify(context.Background()) }},
	} {
		ok, err := step.run()
		var qe *QuorumError
		if ok || !errors.As(err, &qe) || qe.Op != step.op || qe.Got != 0 || len(qe.Nodes) != 3 ||
			!errors.Is(err, ErrUncertain) || !errors.Is(err, ErrNoQuorum) || !errors.Is(err, boom) {
			t.Fatalf("%s = %v, %v", step.op, ok, err)
		}
		if !strings.HasPrefix(err.Error(), "redlock: "+step.op+": no quorum: 0 of 2") {
			t.Fatalf("%s message %q", step.op, err)
		}
		if l.Err() != nil || l.Remaining() <= 0 {
			t.Fatalf("%s without a quorum changed the lock: %v", step.op, l.Err())
		}
	}
	for range 2 {
		o, err := l.Release(context.Background())
		var qe *QuorumError
		if o != 0 || !errors.As(err, &qe) || qe.Op != "release" || !errors.Is(err, ErrUncertain) {
			t.Fatalf("Release = %v, %v", o, err)
		}
		if !errors.Is(l.Err(), ErrReleased) {
			t.Fatalf("Err after Release = %v", l.Err())
		}
	}
	if err := l.Close(); !errors.Is(err, ErrUncertain) {
		t.Fatalf("Close = %v", err)
	}
	for i, n := range nodes {
		if got := n.calls.Load(); got != 5 { // extend, verify, three releases
			t.Errorf("node %d: %d calls, want 5", i, got)
		}
	}
}

// TestLockReleaseIgnoresCtxOnceSent: the deletes of a sent Release run to the node timeout even when
// ctx ends first.
func TestLockReleaseIgnoresCtxOnceSent(t *testing.T) {
	g, _ := fakeGroup(t, 3, func(_ int, ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, WithNodeTimeout(100*time.Millisecond))
	l := testLock(t, g, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := l.Release(ctx)
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Fatalf("Release returned after %v: the sent deletes must wait for the node timeout, not ctx", took)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Release = %v", err)
	}
	for _, n := range qe.Nodes {
		if !errors.Is(n.Err, context.DeadlineExceeded) || !errors.Is(n.Err, ErrUncertain) {
			t.Fatalf("node %d: %v, want the node timeout", n.Index, n.Err)
		}
	}
}

// TestLockSteps_Concurrent: Verify runs beside the Handle's serialised Extend and Release, so the
// in-flight set they share must be guarded (the race detector checks), and every step still runs on
// every node.
func TestLockSteps_Concurrent(t *testing.T) {
	g, nodes := fakeGroup(t, 3, func(i int, ctx context.Context) error {
		if i == 2 {
			time.Sleep(time.Millisecond) // keep node 2's goroutines in flight across steps
		}
		return errors.New("fake: refused")
	})
	l := testLock(t, g, time.Minute)
	const workers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				var err error
				if w%2 == 0 {
					_, err = l.Verify(context.Background())
				} else {
					_, err = l.Extend(context.Background())
				}
				if !errors.Is(err, ErrUncertain) {
					t.Errorf("step = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := l.Release(context.Background()); !errors.Is(err, ErrUncertain) {
		t.Fatalf("Release = %v", err)
	}
	for i, n := range nodes {
		if got := n.calls.Load(); got != workers*rounds+1 {
			t.Errorf("node %d: %d calls, want %d", i, got, workers*rounds+1)
		}
	}
}

func TestScriptsLoaded(t *testing.T) {
	for _, s := range []*luakit.Script{acquireScript, fenceScript, extendScript, verifyScript, releaseScript} {
		if !strings.HasPrefix(s.Source(), "-- "+s.Name()+":") {
			t.Errorf("script %s lacks its header comment", s.Name())
		}
	}
}

func TestNodeContext(t *testing.T) {
	g, err := NewGroup(stubs(3), WithNodeTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	parent, cancelParent := context.WithTimeout(context.Background(), time.Hour)
	defer cancelParent()

	nctx, stop := g.nodeContext(parent)
	if _, ok := nctx.Deadline(); ok {
		t.Fatal("node context carries a deadline (rueidis would close the connection when it passes)")
	}
	<-nctx.Done()
	if !errors.Is(context.Cause(nctx), context.DeadlineExceeded) {
		t.Fatalf("cause after the node timeout = %v", context.Cause(nctx))
	}
	stop()

	nctx, stop = g.nodeContext(parent)
	cancelParent()
	<-nctx.Done()
	if !errors.Is(context.Cause(nctx), context.Canceled) {
		t.Fatalf("cause after the parent ended = %v", context.Cause(nctx))
	}
	stop()
}

// TestFanoutOrderAndTimeout: a step's command on node i starts only after the goroutines of earlier
// steps on node i returned (so it is queued behind theirs), and the step returns at the node timeout
// even when a node's call ignores cancellation (a connection handshake), reporting that node as
// timed out; its settled channel closes when that call returns.
func TestFanoutOrderAndTimeout(t *testing.T) {
	g, err := NewGroup(stubs(3), WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Step 1: node 2's call blocks past the node timeout, ignoring its context.
	unblock := make(chan struct{})
	var started [3]atomic.Int32
	res, settled := g.fanout(context.Background(), nil, nil, func(ctx context.Context, i int) rueidis.RedisResult {
		started[i].Add(1)
		if i == 2 {
			<-unblock
		}
		return rueidis.NewErrorResult(errors.New("reply"))
	})
	for i := range 2 {
		if res[i].err == nil || res[i].err.Error() != "reply" {
			t.Fatalf("node %d: %v, want its reply", i, res[i].err)
		}
	}
	if !errors.Is(res[2].err, context.DeadlineExceeded) {
		t.Fatalf("node 2: %v, want the node timeout", res[2].err)
	}
	prior := inflight(nil).with(settled)
	if len(prior[0]) != 0 || len(prior[1]) != 0 || len(prior[2]) != 1 {
		t.Fatalf("in flight after step 1: %d %d %d, want 0 0 1", len(prior[0]), len(prior[1]), len(prior[2]))
	}

	// Step 2 while node 2's first call is still running: nodes 0 and 1 run, node 2 waits and gives up
	// at the node timeout without calling f.
	var calls [3]atomic.Int32
	step := func() []nodeResult {
		r, _ := g.fanout(context.Background(), nil, prior, func(ctx context.Context, i int) rueidis.RedisResult {
			calls[i].Add(1)
			return rueidis.NewErrorResult(errors.New("reply"))
		})
		return r
	}
	res = step()
	if calls[0].Load() != 1 || calls[1].Load() != 1 || calls[2].Load() != 0 {
		t.Fatalf("calls %d %d %d, want 1 1 0: node 2 must wait for step 1's call", calls[0].Load(), calls[1].Load(), calls[2].Load())
	}
	if !errors.Is(res[2].err, context.DeadlineExceeded) {
		t.Fatalf("node 2 in step 2: %v, want the node timeout", res[2].err)
	}

	// Once step 1's call returns, node 2 runs in the next step.
	close(unblock)
	<-settled[2]
	res = step()
	if calls[2].Load() != 1 || res[2].err == nil || res[2].err.Error() != "reply" {
		t.Fatalf("node 2 after step 1 settled: calls %d, %v", calls[2].Load(), res[2].err)
	}
	if got := prior.with(nil); len(got[2]) != 0 {
		t.Fatalf("settled goroutines are dropped from the in-flight set, got %d", len(got[2]))
	}
}

func TestFencedQuorum(t *testing.T) {
	for _, n := range []int{3, 5, 7, 9} {
		g, err := NewGroup(stubs(n), WithFencing("f"))
		if err != nil {
			t.Fatal(err)
		}
		w := g.FencedQuorum()
		if w != n/2+2 || w > n {
			t.Fatalf("%d nodes: fenced quorum %d", n, w)
		}
		// Two fenced sets share at least three nodes: a token survives the loss of any two.
		if 2*w-n < 3 {
			t.Fatalf("%d nodes: two sets of %d share only %d nodes", n, w, 2*w-n)
		}
	}
}

func TestQuarantineObserve(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	q := &quarantine{nodes: make([]nodeRun, 2)}
	q.learn(10 * time.Second)
	q.learn(3 * time.Second) // the longest stays
	if p := q.period(0); p != 10*time.Second {
		t.Fatalf("period %v", p)
	}
	if p := q.period(time.Minute); p != time.Minute {
		t.Fatalf("period with floor %v", p)
	}
	t0 := time.Now()
	p := q.period(0)
	// A server up for 11 whole seconds (at least 10s, given the one-second slack) counts at once.
	if left := q.observe(0, "a:1", "run-a", 11, t0, p, log); left != 0 {
		t.Fatalf("old server: %v left", left)
	}
	// Up 4 reported seconds: at least 3s, so 7s are left; the same run_id later does not move its start
	// (uptime 100 would otherwise end the quarantine), and it is logged once.
	if left := q.observe(1, "b:2", "run-b", 4, t0, p, log); left != 7*time.Second {
		t.Fatalf("young server: %v left", left)
	}
	if left := q.observe(1, "b:2", "run-b", 100, t0.Add(time.Second), p, log); left != 6*time.Second {
		t.Fatalf("same run_id: %v left", left)
	}
	if left := q.observe(1, "b:2", "run-b", 100, t0.Add(7*time.Second), p, log); left != 0 {
		t.Fatalf("after the quarantine: %v left", left)
	}
	if n := strings.Count(logs.String(), "addr=b:2"); n != 1 {
		t.Fatalf("logged %d times: %s", n, logs.String())
	}
	// A new run_id on node 0 (a restart) quarantines it again, measured from its new uptime; one more
	// warning.
	if left := q.observe(0, "a:1", "run-a2", 0, t0.Add(8*time.Second), p, log); left != 10*time.Second {
		t.Fatalf("restarted server: %v left", left)
	}
	if n := strings.Count(logs.String(), "addr=a:1"); n != 1 {
		t.Fatalf("restart logged %d times: %s", n, logs.String())
	}
	// A new run_id whose process is older than the previous one's last reply (a promoted replica up for
	// an hour) is quarantined from the moment it is seen.
	if left := q.observe(0, "a:1", "run-a3", 3600, t0.Add(9*time.Second), p, log); left != 10*time.Second {
		t.Fatalf("failover: %v left", left)
	}
	if !strings.Contains(logs.String(), "quarantine=10s") {
		t.Fatalf("log lacks the quarantine: %s", logs.String())
	}
}

func TestQuarantinedError(t *testing.T) {
	err := NodeError{Index: 2, Addr: "h:1", Err: &quarantinedError{left: 1500 * time.Millisecond}}
	if !errors.Is(err, ErrQuarantined) || !strings.Contains(err.Error(), "1.5s left") {
		t.Fatalf("%v", err)
	}
}

// TestCleanupTimeout: the group's cleanups and its handles' core are bounded by WithCleanupTimeout,
// else by the node timeout.
func TestCleanupTimeout(t *testing.T) {
	g, err := NewGroup(stubs(3), WithNodeTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if g.own.CleanupTimeout != 300*time.Millisecond || g.cfg.cleanupTimeout() != 300*time.Millisecond {
		t.Fatalf("default cleanup timeout = %v, want the node timeout", g.own.CleanupTimeout)
	}
	g, err = NewGroup(stubs(3), WithCleanupTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if g.own.CleanupTimeout != 50*time.Millisecond || g.cfg.cleanupTimeout() != 50*time.Millisecond {
		t.Fatalf("cleanup timeout = %v, want 50ms", g.own.CleanupTimeout)
	}
}
