package hooks_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
)

// isLeader returns the is-leader gauge's points as instance -> value.
func isLeader(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return matrix.GaugePoints(t, r, leader.MetricIsLeader, string(leader.AttrInstance))
}

// testLeaderIsLeaderGauge checks that two named elections in one process export separate is-leader
// series while they run, the follower's included, none before or after, and that the leader's hooks see its lock's operations.
func testLeaderIsLeaderGauge(t *testing.T, e *env) {
	client := e.client(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	j := &journal{}
	first, err := leader.New(client, "gauge", leader.WithInstance("first"), leader.WithMeterProvider(mp), leader.WithHooks(j))
	if err != nil {
		t.Fatal(err)
	}
	second, err := leader.New(client, "gauge", leader.WithInstance("second"), leader.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	// Only a running Election reports the gauge: none has run yet.
	if got := isLeader(t, reader); len(got) != 0 {
		t.Fatalf("before campaigning: %v, want no point", got)
	}
	ctx := context.Background()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, ok := first.Current(); ok {
			break
		}
	}
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Start runs Run in a goroutine, which registers the gauge's callback: wait for second's point.
	got := isLeader(t, reader)
	for end := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(end); got = isLeader(t, reader) {
		time.Sleep(10 * time.Millisecond)
	}
	if got["first"] != 1 || got["second"] != 0 || len(got) != 2 {
		t.Fatalf("while first leads: %v", got)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := isLeader(t, reader); len(got) != 0 {
		t.Fatalf("after Stop: %v, want no point (a stopped Election reports nothing)", got)
	}
	log := j.take()
	// The Election's own operations, and none of its lock's: a campaign, then (when leadership ends)
	// one resignation.
	if len(log) < 4 || log[0] != "admit LEADER CAMPAIGN" || log[1] != "done LEADER CAMPAIGN succeeded" ||
		log[len(log)-2] != "admit LEADER RESIGN" || log[len(log)-1] != "done LEADER RESIGN succeeded" {
		t.Fatalf("leader hooks journal %q: want LEADER CAMPAIGN first and LEADER RESIGN last", log)
	}
	for _, e := range log {
		if strings.Contains(e, "LOCK") {
			t.Fatalf("leader hooks journal %q: the lock's operations must create no scope", log)
		}
	}
}

// testLeaderRejectedCampaign: a hook that refuses LEADER CAMPAIGN ends Run with its error unchanged,
// before the lease is written.
func testLeaderRejectedCampaign(t *testing.T, e *env) {
	j := &journal{}
	j.setReject("LEADER CAMPAIGN")
	el, err := leader.New(e.client(t), "refused", leader.WithHooks(j), leader.WithInstance("api"))
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Run(context.Background()); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Run = %v, want the rejection unchanged", err)
	}
	if exists(t, e.Raw, el.LeaseKey()) {
		t.Fatal("a rejected campaign wrote the lease")
	}
	expect(t, j, "admit LEADER CAMPAIGN")
	// Inspect is an operation of its own (the lock it reads through has no hooks).
	if _, err := el.Inspect(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.setReject("LEADER INSPECT")
	if _, err := el.Inspect(context.Background()); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Inspect = %v, want the rejection unchanged", err)
	}
	expect(t, j, "admit LEADER INSPECT", "done LEADER INSPECT succeeded", "admit LEADER INSPECT")
}

// elected waits until e leads and returns its term; the bound only turns a lost campaign into a
// failure instead of a hang.
func elected(t *testing.T, e *leader.Election) leader.Term {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if term, ok := e.Current(); ok {
			return term
		}
	}
	t.Fatal("not elected")
	return leader.Term{}
}

// testLeaderRejectedRenew: a rejected LEADER RENEW sends nothing and keeps the lease and the term (it
// is handled like a failed renewal and retried); once the hook admits again, the next renewal extends
// the same term.
func testLeaderRejectedRenew(t *testing.T, e *env) {
	const ttl = 4 * time.Second // renewals from 2s; the term self-fences at 3.6s: room to lift the rejection
	j := &journal{}
	el, err := leader.New(e.client(t), "hooks-renew", leader.WithHooks(j), leader.WithInstance("api"),
		leader.WithLeaseDuration(ttl), leader.WithRetryDelay(50*time.Millisecond),
		leader.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := el.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = el.Stop(ctx) }()
	term := elected(t, el)
	j.setReject("LEADER RENEW") // the first renewal comes at half the lease duration
	j.take()
	waitFor(t, j, "admit LEADER RENEW")
	// Nothing was sent: the lease was not extended (a renewal would have set it back to ttl), and the
	// term goes on.
	if d := time.Duration(e.PTTL(t, el.LeaseKey())) * time.Millisecond; d <= 0 || d > ttl*3/4 {
		t.Fatalf("after a rejected renewal the lease has %v left, want (0, %v]", d, ttl*3/4)
	}
	if now, ok := el.Current(); !ok || now.FencingToken != term.FencingToken {
		t.Fatalf("a rejected renewal ended the term (current %v %v)", now.FencingToken, ok)
	}
	j.setReject()
	waitFor(t, j, "done LEADER RENEW succeeded")
	if now, ok := el.Current(); !ok || now.FencingToken != term.FencingToken {
		t.Fatalf("after the retried renewal: current %v %v, want term %v", now.FencingToken, ok, term.FencingToken)
	}
	if d := time.Duration(e.PTTL(t, el.LeaseKey())) * time.Millisecond; d <= ttl*3/4 {
		t.Fatalf("the admitted renewal left %v on the lease, want more than %v", d, ttl*3/4)
	}
	if err := el.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// testLeaderRejectedResign: a rejected LEADER RESIGN releases nothing: Run ends cleanly, the lease
// stays held until it expires, and another candidate cannot take it meanwhile.
func testLeaderRejectedResign(t *testing.T, e *env) {
	const ttl = time.Minute
	j := &journal{}
	client := e.client(t)
	el, err := leader.New(client, "hooks-resign", leader.WithHooks(j), leader.WithLeaseDuration(ttl),
		leader.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := el.Start(ctx); err != nil {
		t.Fatal(err)
	}
	elected(t, el)
	j.setReject("LEADER RESIGN")
	j.take()
	if err := el.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v, want nil (a rejected resignation leaves the lease to expire)", err)
	}
	expect(t, j, "admit LEADER RESIGN")
	if d := time.Duration(e.PTTL(t, el.LeaseKey())) * time.Millisecond; d <= 0 {
		t.Fatalf("after a rejected resignation the lease has %v left, want it held", d)
	}
	locker, err := lock.New(client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.TryAcquire(ctx, "hooks-resign", time.Second); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another candidate's TryAcquire = %v, want ErrNotAcquired", err)
	}
	// Clean up the lease the rejection left behind (this target's later scenarios use other keys).
	if err := e.Raw.Do(ctx, e.Raw.B().Del().Key(el.LeaseKey()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}
