package lockbench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	contenderpkg "github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// statsSkip are the commands a commandstats delta leaves out: the INFO that reads it, and the PINGs
// rueidis sends on idle connections (liveness probes, not lock traffic).
var statsSkip = []string{"info", "ping"}

// commandstats reads INFO commandstats through c.
func commandstats(b *testing.B, c rueidis.Client) map[string]peers.Stat {
	b.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	st, err := peers.ParseCommandstats(s)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// perCommand returns after-before per command (calls), without statsSkip.
func perCommand(before, after map[string]peers.Stat) map[string]int64 {
	out := map[string]int64{}
	for name, a := range after {
		if slices.Contains(statsSkip, name) {
			continue
		}
		if d := a.Calls - before[name].Calls; d != 0 {
			out[name] = d
		}
	}
	return out
}

// formatCounts renders per-command counts divided by n, sorted by name.
func formatCounts(m map[string]int64, n int) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		sb.WriteString(k + "=" + strconv.FormatFloat(float64(m[k])/float64(n), 'f', 2, 64) + " ")
	}
	return sb.String()
}

// BenchmarkCycleCommands: the server side of one TryAcquire+Release cycle, run serially so that the
// INFO commandstats delta is the cycle's own: cmds/op (every command the server executed, those run
// inside scripts included) and server-usec/op (the commands' CPU time). fresh takes a new lock name per
// cycle (the counter does not exist yet, as in BenchmarkTryAcquireRelease); existing reuses one name,
// so the counter exists (the steady state of a real lock). raw-rueidis is the ceiling's script pair.
// -v logs the per-command breakdown.
func BenchmarkCycleCommands(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "{bench:*")
	stats := benchkit.NewClient(b, s)
	for _, spec := range []struct {
		name  string
		fresh bool
		c     contenderpkg.Lock
	}{
		{"coordkit/fresh", true, newContender(b, lockSpec(b, contenderpkg.Coordkit), s)},
		{"coordkit/existing", false, newContender(b, lockSpec(b, contenderpkg.Coordkit), s)},
		{"raw-rueidis/fresh", true, newContender(b, lockSpec(b, contenderpkg.RawRueidis), s)},
	} {
		b.Run(spec.name, func(b *testing.B) {
			ctx := context.Background()
			run := strconv.FormatInt(runSeq.Add(1), 10)
			before := commandstats(b, stats)
			b.ResetTimer()
			for i := range b.N {
				key := "bench:cmds:" + run
				if spec.fresh {
					key += ":" + strconv.Itoa(i)
				}
				if err := spec.c.TryAcquireRelease(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := commandstats(b, stats)
			d := peers.Delta(before, after, statsSkip...)
			b.ReportMetric(float64(d.Calls)/float64(b.N), "cmds/op")
			b.ReportMetric(float64(d.Usec)/float64(b.N), "server-usec/op")
			b.Logf("per cycle: %s", formatCounts(perCommand(before, after), b.N))
		})
	}
}

// handoffContender is one lock library in BenchmarkHandoffPeers: take the lock named name, start a
// waiter for it on a second instance (its own client), release after the settle time, and report when
// the release started and when the waiter had the lock; the waiter's lock is then released.
type handoffContender struct {
	name string
	// run makes one hand-off of name; it returns the latency from the release call to the waiter's
	// acquisition returning.
	run func(b *testing.B, name string) time.Duration
	// timeline, when set, returns the stages of the last hand-off (coordkit only).
	timeline func() []time.Duration
}

// BenchmarkHandoffPeers measures the lock hand-off of Coordkit and rueidislock in one run, interleaved
// hand-off by hand-off (the order alternating), with fresh lock names: the holder takes the lock, a
// waiter on another client waits for it, and after handoffSettle the holder releases. It reports for
// each contender p50-ms and p99-ms of release call -> waiter acquired, and cmds/op: every command the
// server executed per hand-off (INFO commandstats; the holder's acquisition, the waiter's attempts and
// tracking, the release, the waiter's acquisition and its release). The coordkit/... rows differ in
// the rueidis client settings of holder and waiter; the coordkit/default row also logs (-v) a
// timeline of the waiter's side.
//
// rueidislock runs with KeyMajority 1 (one key on one server, like Coordkit's lock; its default of 2
// takes 2 of 3 keys) and KeyValidity handoffTTL. Run it with a count, for example -benchtime=40x.
func BenchmarkHandoffPeers(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "{bench:*", "rueidislock:*")
	stats := benchkit.NewClient(b, s)
	var contenders []handoffContender
	for _, cs := range clientSettings {
		contenders = append(contenders, coordkitHandoff(b, s, "coordkit/"+cs.name, cs.set))
	}
	contenders = append(contenders, rueidislockHandoff(b, s))
	lat := make([][]time.Duration, len(contenders))
	calls := make([]int64, len(contenders))
	breakdown := make([]map[string]int64, len(contenders))
	var stages [][]time.Duration
	run := strconv.FormatInt(runSeq.Add(1), 10)
	b.ResetTimer()
	for i := range b.N {
		for k := range contenders {
			j := (k + i) % len(contenders)
			c := contenders[j]
			before := commandstats(b, stats)
			lat[j] = append(lat[j], c.run(b, "bench:handoffpeers:"+run+":"+strconv.Itoa(i)+":"+strconv.Itoa(j)))
			after := commandstats(b, stats)
			calls[j] += peers.Delta(before, after, statsSkip...).Calls
			if breakdown[j] == nil {
				breakdown[j] = map[string]int64{}
			}
			for name, n := range perCommand(before, after) {
				breakdown[j][name] += n
			}
			if c.timeline != nil {
				stages = append(stages, c.timeline())
			}
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(contenders))
	for j, c := range contenders {
		p50[j] = quantile(lat[j], 0.50)
		b.ReportMetric(p50[j], c.name+"-p50-ms")
		b.ReportMetric(quantile(lat[j], 0.99), c.name+"-p99-ms")
		b.ReportMetric(float64(calls[j])/float64(b.N), c.name+"-cmds/op")
		b.Logf("%s: commands per hand-off: %s", c.name, formatCounts(breakdown[j], b.N))
	}
	b.ReportMetric(p50[0]/p50[len(p50)-1], "coordkit/rueidislock-p50")
	if len(stages) > 0 {
		names := []string{"release sent -> invalidation received", "-> acquisition sent", "-> acquisition replied", "-> Acquire returned", "release sent -> release replied"}
		for k, name := range names {
			var xs []time.Duration
			for _, st := range stages {
				if k < len(st) {
					xs = append(xs, st[k])
				}
			}
			b.Logf("coordkit/default timeline, median over %d: %s %.3f ms", len(xs), name, quantile(xs, 0.5))
		}
	}
}

// quantile returns the p-quantile of xs in milliseconds (xs is sorted in place).
func quantile(xs []time.Duration, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := min(max(int(p*float64(len(xs))+0.999999)-1, 0), len(xs)-1)
	return float64(xs[i]) / float64(time.Millisecond)
}

// timeline records when the waiter's client saw the stages of one hand-off.
type timeline struct {
	mu                          sync.Mutex
	release, inval, sent, reply time.Time
}

func (t *timeline) mark(at *time.Time) {
	t.mu.Lock()
	if !t.release.IsZero() && at.IsZero() {
		*at = time.Now()
	}
	t.mu.Unlock()
}

// timedClient is the waiter's client: it records the first acquisition sent after the release and its
// reply.
type timedClient struct {
	rueidis.Client
	t *timeline
}

func isEvalsha(cmd rueidis.Completed) bool {
	c := cmd.Commands()
	return len(c) > 0 && c[0] == "EVALSHA"
}

func (c *timedClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ev := isEvalsha(cmd)
	if ev {
		c.t.mark(&c.t.sent)
	}
	r := c.Client.Do(ctx, cmd)
	if ev {
		c.t.mark(&c.t.reply)
	}
	return r
}

func (c *timedClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	ev := len(multi) > 0 && isEvalsha(multi[len(multi)-1])
	if ev {
		c.t.mark(&c.t.sent)
	}
	r := c.Client.DoMulti(ctx, multi...)
	if ev {
		c.t.mark(&c.t.reply)
	}
	return r
}

// waited is what a waiting Acquire returned, and when.
type waited struct {
	lease *lock.Lease
	err   error
	at    time.Time
}

// coordkitHandoff: a holder Locker on a cache-free client and a waiter Locker on a tracked client,
// both with the options set adjusts.
func coordkitHandoff(b *testing.B, s *testkit.Server, name string, set func(*rueidis.ClientOption)) handoffContender {
	holder, err := lock.New(benchkit.NewClient(b, s, set))
	if err != nil {
		b.Fatal(err)
	}
	tl := &timeline{}
	tr := luakit.NewTracker()
	opt := s.ClientOption()
	set(&opt)
	opt.OnInvalidations = func(m []rueidis.RedisMessage) {
		tl.mark(&tl.inval)
		tr.OnInvalidations(m)
	}
	wc, err := rueidis.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(wc.Close)
	waiter, err := lock.New(&timedClient{Client: wc, t: tl}, lock.WithTracker(tr))
	if err != nil {
		b.Fatal(err)
	}
	var last []time.Duration
	return handoffContender{
		name: name,
		run: func(b *testing.B, key string) time.Duration {
			ctx := context.Background()
			h, err := holder.TryAcquire(ctx, key, handoffTTL)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan waited, 1)
			go func() {
				l, err := waiter.Acquire(ctx, key, handoffTTL)
				done <- waited{l, err, time.Now()}
			}()
			time.Sleep(handoffSettle)
			tl.mu.Lock()
			tl.release, tl.inval, tl.sent, tl.reply = time.Now(), time.Time{}, time.Time{}, time.Time{}
			start := tl.release
			tl.mu.Unlock()
			if _, err := h.Release(ctx); err != nil {
				b.Fatal(err)
			}
			released := time.Now()
			r := <-done
			if r.err != nil {
				b.Fatal(r.err)
			}
			tl.mu.Lock()
			since := func(t time.Time, from time.Time) time.Duration {
				if t.IsZero() || from.IsZero() {
					return 0
				}
				return t.Sub(from)
			}
			last = []time.Duration{since(tl.inval, start), since(tl.sent, tl.inval), since(tl.reply, tl.sent), since(r.at, tl.reply), released.Sub(start)}
			tl.release = time.Time{}
			tl.mu.Unlock()
			if _, err := r.lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
			return r.at.Sub(start)
		},
		timeline: func() []time.Duration { return last },
	}
}

// rueidislockHandoff: two rueidislock Lockers, each with its own client.
func rueidislockHandoff(b *testing.B, s *testkit.Server) handoffContender {
	mk := func() rueidislock.Locker {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: s.ClientOption(),
			KeyMajority:  1,
			KeyValidity:  handoffTTL,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(l.Close)
		return l
	}
	holder, waiter := mk(), mk()
	return handoffContender{
		name: "rueidislock",
		run: func(b *testing.B, key string) time.Duration {
			ctx := context.Background()
			_, release, err := holder.TryWithContext(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			type acquired struct {
				release context.CancelFunc
				err     error
				at      time.Time
			}
			done := make(chan acquired, 1)
			go func() {
				_, rel, err := waiter.WithContext(ctx, key)
				done <- acquired{rel, err, time.Now()}
			}()
			time.Sleep(handoffSettle)
			start := time.Now()
			release()
			r := <-done
			if r.err != nil {
				b.Fatal(r.err)
			}
			r.release()
			return r.at.Sub(start)
		},
	}
}

// clientSettings are the rueidis settings compared for latency: the default (auto-pipelining over
// 2^PipelineMultiplex connections), one pipelined connection, a 20µs flush delay, and a pooled
// connection per call (DisableAutoPipelining).
var clientSettings = []struct {
	name string
	set  func(*rueidis.ClientOption)
}{
	{"default", func(*rueidis.ClientOption) {}},
	{"multiplex=-1", func(o *rueidis.ClientOption) { o.PipelineMultiplex = -1 }},
	{"maxflushdelay=20us", func(o *rueidis.ClientOption) { o.MaxFlushDelay = 20 * time.Microsecond }},
	{"disableautopipelining", func(o *rueidis.ClientOption) { o.DisableAutoPipelining = true }},
}

// BenchmarkCycleSettings: Coordkit's TryAcquire+Release (as BenchmarkTryAcquireRelease) over a client
// with each of clientSettings; with -cpu=1 its ns/op is one cycle's latency.
func BenchmarkCycleSettings(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "{bench:*")
	for _, cs := range clientSettings {
		b.Run(cs.name, func(b *testing.B) {
			lk, err := lock.New(benchkit.NewClient(b, s, cs.set))
			if err != nil {
				b.Fatal(err)
			}
			runContender(b, lockerContender{lk})
		})
	}
}

// lockerContender is Coordkit's row over a Locker built here (BenchmarkCycleSettings' clients).
type lockerContender struct{ lk *lock.Locker }

func (lockerContender) Name() string { return contenderpkg.Coordkit }
func (lockerContender) Close()       {}

func (c lockerContender) TryAcquireRelease(ctx context.Context, key string) error {
	lease, err := c.lk.TryAcquire(ctx, key, time.Second)
	if err != nil {
		return err
	}
	out, err := lease.Release(ctx)
	if err != nil {
		return err
	}
	if out != lock.Released {
		return fmt.Errorf("release: %v", out)
	}
	return nil
}
