package ratelimit_test

// Reference models of the engine's algorithms, written from the policy documentation, and the step
// runner of the exactness tables. Every expectation is computed from the server time of the decision
// (Result.At) and the model's state, which is checked against the stored state after every step;
// local clocks only decide when to send a step, never what it must return.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// engWant is the expected outcome of one decision.
type engWant struct {
	allowed                        bool
	remaining, limit, retry, reset int64 // retry and reset in µs
	component                      int
}

// engModel is the reference model of the state at one key.
type engModel interface {
	// decide applies one decision of n permits at server time now (µs).
	decide(now, n int64) engWant
	// fields is the expected raw state (as env.dump returns it), nil when absent.
	fields() map[string]string
	// expireAt is the expected PEXPIRETIME in ms (the µs expiry rounded up; 0 when absent).
	expireAt() int64
	// effective describes the usage a raw state (a dump or fields()) means at server time at, so
	// that a state compared after it may have expired still compares.
	effective(raw map[string]string, at int64) string
	// anchor maps the server time of a table's first step to the time its offsets count from.
	anchor(at int64) int64
}

// engComp is the model of one component of a hash layout.
type engComp interface {
	avail(now int64) int64
	retry(now, want int64) int64
	consume(now, n int64)
	full(now int64) int64
	put(i int, m map[string]string)
	clear()
	limit() int64
	effective(i int, raw map[string]string, at int64) string
}

func engCeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// engGone reports whether the server has expired a key set to expire at server time exp (µs) by
// server time now (µs): PEXPIREAT is exp rounded up to whole ms, and the server expires a key once
// its clock in ms passes that.
func engGone(now, exp int64) bool { return now/1000 > engCeilDiv(exp, 1000) }

// engFixed models a fixed window: count n in the window ending at e.
type engFixed struct{ lim, w, n, e int64 }

func (m *engFixed) eff(now int64) (int64, int64) {
	if m.n > 0 && now < m.e {
		return m.n, m.e
	}
	return 0, 0
}
func (m *engFixed) avail(now int64) int64 { n, _ := m.eff(now); return m.lim - n }
func (m *engFixed) retry(now, _ int64) int64 {
	_, e := m.eff(now)
	return e - now
}
func (m *engFixed) consume(now, k int64) {
	if n, _ := m.eff(now); n == 0 {
		m.n, m.e = k, now+m.w
	} else {
		m.n = n + k
	}
}
func (m *engFixed) full(now int64) int64 {
	if n, e := m.eff(now); n > 0 {
		return e
	}
	return now
}
func (m *engFixed) put(i int, f map[string]string) {
	if m.n > 0 {
		f[fmt.Sprintf("%d.n", i)] = strconv.FormatInt(m.n, 10)
		f[fmt.Sprintf("%d.e", i)] = strconv.FormatInt(m.e, 10)
	}
}
func (m *engFixed) clear()       { m.n, m.e = 0, 0 }
func (m *engFixed) limit() int64 { return m.lim }
func (m *engFixed) effective(i int, raw map[string]string, at int64) string {
	n := engInt(raw, fmt.Sprintf("%d.n", i))
	e := engInt(raw, fmt.Sprintf("%d.e", i))
	if n > 0 && at < e {
		return fmt.Sprintf("fixed n=%d end=%d", n, e)
	}
	return "fixed full"
}

// engSliding models a sliding window: permits per segment end.
type engSliding struct {
	lim, w, width int64
	segs          map[int64]int64
}

func (m *engSliding) active(now int64) []int64 {
	var ends []int64
	for e := range m.segs {
		if e+m.w > now {
			ends = append(ends, e)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	return ends
}
func (m *engSliding) avail(now int64) int64 {
	used := int64(0)
	for _, e := range m.active(now) {
		used += m.segs[e]
	}
	return m.lim - used
}
func (m *engSliding) retry(now, want int64) int64 {
	need := want - m.avail(now)
	for _, e := range m.active(now) {
		need -= m.segs[e]
		if need <= 0 {
			return e + m.w - now
		}
	}
	panic("sliding retry: request above capacity")
}
func (m *engSliding) consume(now, k int64) {
	for e := range m.segs {
		if e+m.w <= now {
			delete(m.segs, e)
		}
	}
	m.segs[engCeilDiv(now, m.width)*m.width] += k
}
func (m *engSliding) full(now int64) int64 {
	if a := m.active(now); len(a) > 0 {
		return a[len(a)-1] + m.w
	}
	return now
}
func (m *engSliding) put(i int, f map[string]string) {
	for e, c := range m.segs {
		f[fmt.Sprintf("%d:%d", i, e)] = strconv.FormatInt(c, 10)
	}
}
func (m *engSliding) clear()       { m.segs = map[int64]int64{} }
func (m *engSliding) limit() int64 { return m.lim }
func (m *engSliding) effective(i int, raw map[string]string, at int64) string {
	var parts []string
	prefix := fmt.Sprintf("%d:", i)
	for k, v := range raw {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			e, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				return "bad field " + k
			}
			if e+m.w > at {
				parts = append(parts, rest+"="+v)
			}
		}
	}
	sort.Strings(parts)
	return "sliding " + strings.Join(parts, ",")
}

// engBucket models a token bucket: t tokens at the start r of the current refill period.
type engBucket struct {
	lim, tpp, per int64
	t, r          int64
	has           bool
}

func (m *engBucket) settleFrom(has bool, t, r, now int64) (int64, int64) {
	if !has {
		return m.lim, now
	}
	if t < m.lim {
		if k := (now - r) / m.per; k > 0 {
			if k >= engCeilDiv(m.lim-t, m.tpp) {
				t = m.lim
			} else {
				t, r = t+k*m.tpp, r+k*m.per
			}
		}
	}
	if t >= m.lim {
		return m.lim, now
	}
	return t, r
}
func (m *engBucket) settle(now int64) (int64, int64) { return m.settleFrom(m.has, m.t, m.r, now) }
func (m *engBucket) avail(now int64) int64           { t, _ := m.settle(now); return t }
func (m *engBucket) retry(now, want int64) int64 {
	t, r := m.settle(now)
	return r + engCeilDiv(want-t, m.tpp)*m.per - now
}
func (m *engBucket) consume(now, k int64) {
	t, r := m.settle(now)
	m.t, m.r, m.has = t-k, r, true
}
func (m *engBucket) full(now int64) int64 {
	t, r := m.settle(now)
	if t >= m.lim {
		return now
	}
	return r + engCeilDiv(m.lim-t, m.tpp)*m.per
}
func (m *engBucket) put(i int, f map[string]string) {
	if m.has {
		f[fmt.Sprintf("%d.t", i)] = strconv.FormatInt(m.t, 10)
		f[fmt.Sprintf("%d.r", i)] = strconv.FormatInt(m.r, 10)
	}
}
func (m *engBucket) clear()       { m.has = false }
func (m *engBucket) limit() int64 { return m.lim }
func (m *engBucket) effective(i int, raw map[string]string, at int64) string {
	_, has := raw[fmt.Sprintf("%d.t", i)]
	t, r := m.settleFrom(has, engInt(raw, fmt.Sprintf("%d.t", i)), engInt(raw, fmt.Sprintf("%d.r", i)), at)
	if t >= m.lim {
		return "bucket full"
	}
	return fmt.Sprintf("bucket t=%d r=%d", t, r)
}

// engHash models the hash layouts (standalone fixed, sliding, token bucket; composite).
type engHash struct {
	tag, sig string
	comps    []engComp
	exists   bool
	exp      int64
}

func (h *engHash) decide(now, n int64) engWant {
	if h.exists && engGone(now, h.exp) {
		h.exists, h.exp = false, 0
		for _, c := range h.comps {
			c.clear()
		}
	}
	want := max(n, 1)
	w := engWant{allowed: true}
	avail := make([]int64, len(h.comps))
	bind := -1 // the rejecting component with the longest wait, the first on ties
	for i, c := range h.comps {
		avail[i] = c.avail(now)
		if avail[i] < want {
			w.allowed = false
			if r := c.retry(now, want); bind < 0 || r > w.retry {
				w.retry, bind = r, i
			}
		}
	}
	used := int64(0)
	if w.allowed && n > 0 {
		used, h.exists, h.exp = n, true, now
		for _, c := range h.comps {
			c.consume(now, n)
		}
		for _, c := range h.comps {
			h.exp = max(h.exp, c.full(now))
		}
	}
	w.remaining = -1
	if bind >= 0 {
		w.remaining, w.component = max(avail[bind], 0), bind
	}
	for i := range h.comps {
		if r := max(avail[i]-used, 0); bind < 0 && (w.remaining < 0 || r < w.remaining) {
			w.remaining, w.component = r, i
		}
	}
	c := h.comps[w.component]
	w.limit, w.reset = c.limit(), c.full(now)-now
	return w
}

func (h *engHash) fields() map[string]string {
	if !h.exists {
		return nil
	}
	f := map[string]string{"L": h.tag, "U": "1"}
	if h.sig != "" {
		f["S"] = h.sig
	}
	for i, c := range h.comps {
		c.put(i, f)
	}
	return f
}

func (h *engHash) expireAt() int64 { return engCeilDiv(h.exp, 1000) }

func (h *engHash) effective(raw map[string]string, at int64) string {
	parts := make([]string, len(h.comps))
	for i, c := range h.comps {
		parts[i] = c.effective(i, raw, at)
	}
	return strings.Join(parts, " | ")
}

func (h *engHash) anchor(at int64) int64 {
	if s, ok := h.comps[0].(*engSliding); ok {
		return engCeilDiv(at, s.width) * s.width
	}
	return at
}

// engGCRA models GCRA: the theoretical arrival time tat (0 when absent).
type engGCRA struct{ burst, T, tat int64 }

func (g *engGCRA) decide(now, n int64) engWant {
	if g.tat != 0 && engGone(now, g.tat) {
		g.tat = 0
	}
	base := max(g.tat, now)
	want := max(n, 1)
	w := engWant{limit: g.burst}
	if base+want*g.T-now <= g.burst*g.T {
		w.allowed = true
		if n > 0 {
			g.tat = base + n*g.T
		}
	} else {
		w.retry = base + want*g.T - now - g.burst*g.T
	}
	cur := max(g.tat, now)
	w.remaining = max((g.burst*g.T-(cur-now))/g.T, 0)
	w.reset = cur - now
	return w
}

func (g *engGCRA) fields() map[string]string {
	if g.tat == 0 {
		return nil
	}
	return map[string]string{"": "u" + strconv.FormatInt(g.tat, 10)}
}

func (g *engGCRA) expireAt() int64 { return engCeilDiv(g.tat, 1000) }

func (g *engGCRA) effective(raw map[string]string, at int64) string {
	if tat := engTAT(raw); tat > at {
		return "tat=" + strconv.FormatInt(tat, 10)
	}
	return "full"
}

func (g *engGCRA) anchor(at int64) int64 { return at }

// engTAT is the TAT (µs) of a stored GCRA value ("u<TAT>", optionally with "|version|signature"); 0
// when absent, -1 when it is not one.
func engTAT(raw map[string]string) int64 {
	v, ok := raw[""]
	if !ok {
		return 0
	}
	v, ok = strings.CutPrefix(v, "u")
	if !ok {
		return -1
	}
	v, _, _ = strings.Cut(v, "|")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func engInt(raw map[string]string, k string) int64 {
	v, ok := raw[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// engModelOf builds the model of p, durations in µs (rounded up).
func engModelOf(t *testing.T, p ratelimit.Policy) engModel {
	t.Helper()
	us := engMicros
	comp := func(c ratelimit.Policy) engComp {
		switch v := c.(type) {
		case ratelimit.FixedWindow:
			return &engFixed{lim: v.Limit, w: us(v.Window)}
		case ratelimit.SlidingWindow:
			seg := engSegments(v)
			return &engSliding{lim: v.Limit, w: us(v.Window), width: engCeilDiv(us(v.Window), seg), segs: map[int64]int64{}}
		case ratelimit.TokenBucket:
			return &engBucket{lim: v.Limit, tpp: v.TokensPerPeriod, per: us(v.Period)}
		}
		t.Fatalf("no model for %T", c)
		return nil
	}
	switch v := p.(type) {
	case ratelimit.GCRA:
		return &engGCRA{burst: v.Burst, T: us(v.EmissionInterval)}
	case ratelimit.FixedWindow:
		return &engHash{tag: "fw", comps: []engComp{comp(v)}}
	case ratelimit.SlidingWindow:
		return &engHash{tag: "sw", comps: []engComp{comp(v)}}
	case ratelimit.TokenBucket:
		return &engHash{tag: "tb", comps: []engComp{comp(v)}}
	case ratelimit.Composite:
		h := &engHash{tag: "cp", sig: engSignature(t, v)}
		for _, c := range v.Components {
			h.comps = append(h.comps, comp(c))
		}
		return h
	}
	t.Fatalf("no model for %T", p)
	return nil
}

// engSegments is the sliding window's segment count (0 means ratelimit.DefaultSegments).
func engSegments(v ratelimit.SlidingWindow) int64 {
	if v.Segments == 0 {
		return ratelimit.DefaultSegments
	}
	return int64(v.Segments)
}

// engMicros is d in whole µs, rounded up.
func engMicros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// engSignature is the documented signature text of a composite (durations in µs).
func engSignature(t *testing.T, c ratelimit.Composite) string {
	t.Helper()
	us := engMicros
	parts := []string{"v2"}
	for _, p := range c.Components {
		switch v := p.(type) {
		case ratelimit.FixedWindow:
			parts = append(parts, fmt.Sprintf("f%d/%d", v.Limit, us(v.Window)))
		case ratelimit.SlidingWindow:
			parts = append(parts, fmt.Sprintf("s%d/%d/%d", v.Limit, us(v.Window), engSegments(v)))
		case ratelimit.TokenBucket:
			parts = append(parts, fmt.Sprintf("t%d/%d/%d", v.Limit, v.TokensPerPeriod, us(v.Period)))
		default:
			t.Fatalf("component %T", p)
		}
	}
	return strings.Join(parts, "|")
}

// engWrites counts the writing commands every server process has run (scripts' calls included).
func engWrites(st map[string]int64) int64 {
	var n int64
	for _, c := range []string{"hset", "hmset", "hdel", "set", "pexpireat", "pexpire", "expire", "del", "unlink"} {
		n += st[c]
	}
	return n
}

// engScripts counts EVAL and EVALSHA calls (read-only variants included).
func engScripts(st map[string]int64) int64 {
	return st["eval"] + st["evalsha"] + st["eval_ro"] + st["evalsha_ro"]
}

// engExpireTime returns PEXPIRETIME of key (-2 absent, -1 no expiry).
func engExpireTime(t *testing.T, e *env, key string) int64 {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Pexpiretime().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return v
}

// engCheckState compares the stored state at key with the model: exactly while the model's state
// has not expired, and by its effective meaning at a later server time in any case.
func engCheckState(t *testing.T, e *env, key string, m engModel, step string) {
	t.Helper()
	dump := engDump(t, e, key, m)
	pxt := engExpireTime(t, e, key)
	at := e.serverMicros(t, key)
	want := m.fields()
	if dump != nil && want != nil {
		require.Equal(t, want, dump, "%s: stored state", step)
	}
	require.Equal(t, m.effective(want, at), m.effective(dump, at), "%s: effective state at %d", step, at)
	switch {
	case pxt >= 0:
		require.Equal(t, m.expireAt(), pxt, "%s: PEXPIRETIME", step)
	case pxt == -2:
		require.LessOrEqual(t, m.expireAt(), at/1000, "%s: key absent although the model expires later", step)
	default:
		t.Fatalf("%s: key without expiry", step)
	}
}

// engDump reads the state at key in one command (GET for GCRA, HGETALL otherwise), so that a key
// expiring during the read reads as absent; nil when absent.
func engDump(t *testing.T, e *env, key string, m engModel) map[string]string {
	t.Helper()
	if _, ok := m.(*engGCRA); ok {
		v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return nil
		}
		require.NoError(t, err)
		return map[string]string{"": v}
	}
	h, err := e.Raw.Do(ctx(t), e.Raw.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	if len(h) == 0 {
		return nil
	}
	return h
}

// engWaitServer returns once the server clock of key's node reaches target (Unix µs): it sleeps
// until about a millisecond before and then reads TIME until it passes. Only when a step is sent
// depends on this; what the step must return is computed from the decision's own server time.
func engWaitServer(t *testing.T, e *env, key string, target int64) {
	t.Helper()
	node := e.nodeOf(t, key) // looked up once: a lookup per read would make the wait coarse on Cluster
	for {
		now := nodeMicros(t, node)
		if now >= target {
			return
		}
		if d := target - now; d > 2000 {
			time.Sleep(time.Duration(d-1000) * time.Microsecond)
		}
	}
}

// engStep is one row of an exactness table: n permits requested off units (the case's unit, ms by
// default) after the case's anchor (the first step's server time, or the end of its segment for a
// sliding window).
type engStep struct {
	off  int64
	n    int64
	note string
}

// engCase is one exactness table.
type engCase struct {
	name   string
	policy ratelimit.Policy
	steps  []engStep
	unit   time.Duration // of the steps' offsets: time.Millisecond when 0
}

// engStats aggregates how a run went.
type engStats struct {
	rows, timed, onTarget, local int
}

// engRun drives one exactness table on a fresh key through the public API and checks every step
// against the model: the Result, the stored state and expiry, one script per decision, and no write
// for probes and rejections.
func engRun(t *testing.T, e *env, c engCase) engStats {
	t.Helper()
	key := e.key(t)
	l := e.limiter(t, nil, key, c.policy)
	// Load the script on the node serving key first (a probe on key itself, which writes nothing), so
	// that each step is exactly one EVALSHA. (Probes on other keys reach the key's node only by chance
	// on a Cluster: a first decision there was EVALSHA + EVAL.)
	_, err := e.limiter(t, nil, key, c.policy).AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.False(t, e.exists(t, key), "the warm-up probe wrote nothing")
	m := engModelOf(t, c.policy)
	var st engStats
	var base, last int64
	for i, s := range c.steps {
		step := fmt.Sprintf("%s step %d (off %d, n %d: %s)", c.name, i, s.off, s.n, s.note)
		unit := c.unit
		if unit == 0 {
			unit = time.Millisecond
		}
		target := base + s.off*engMicros(unit)
		before := e.CommandStats(t)
		timed := i > 0 && e.serverMicros(t, key) < target
		if timed {
			engWaitServer(t, e, key, target)
			st.timed++
		}
		res, err := l.AllowN(ctx(t), s.n)
		require.NoError(t, err, step)
		d := e.CommandsSince(t, before)
		st.rows++
		if res.At.IsZero() {
			st.local++
			require.False(t, res.Allowed, step)
			require.Equal(t, ratelimit.ReasonCapacity, res.Reason, step)
			require.Zero(t, res.RetryAfter, "%s: no RetryAfter above the capacity", step)
			require.Equal(t, int64(0), engScripts(d), "%s: decided without I/O", step)
			require.Equal(t, int64(0), engWrites(d), step)
			require.Equal(t, engCapacity(c.policy), res.Limit, step)
			require.Greater(t, s.n, engCapacity(c.policy), "%s: a local decision below the capacity", step)
			continue
		}
		require.LessOrEqual(t, s.n, engCapacity(c.policy), "%s: a request above the capacity reached the server", step)
		now := res.At.UnixMicro()
		require.Equal(t, res.At, time.UnixMicro(now), "%s: At has microsecond precision", step)
		require.GreaterOrEqual(t, now, last, "%s: server time went back", step)
		last = now
		if i == 0 {
			base = m.anchor(now)
		} else if timed && now == target {
			st.onTarget++
		}
		want := m.decide(now, s.n)
		got := engWant{allowed: res.Allowed, remaining: res.Remaining, limit: res.Limit,
			retry: res.RetryAfter.Microseconds(), reset: res.Reset.Microseconds(), component: res.Component}
		require.Equal(t, want, got, "%s at server time %d (anchor %+d µs)", step, now, now-base)
		require.Equal(t, res.RetryAfter, time.Duration(want.retry)*time.Microsecond, step)
		require.Equal(t, res.Reset, time.Duration(want.reset)*time.Microsecond, step)
		if res.Allowed {
			require.Equal(t, ratelimit.ReasonNone, res.Reason, step)
		} else {
			require.Equal(t, ratelimit.ReasonCapacity, res.Reason, step)
		}
		require.Equal(t, int64(1), engScripts(d), "%s: one script per decision", step)
		if !res.Allowed || s.n == 0 {
			require.Equal(t, int64(0), engWrites(d), "%s: probes and rejections write nothing", step)
		} else {
			require.Positive(t, engWrites(d), step)
		}
		engCheckState(t, e, key, m, step)
	}
	return st
}

// engCapacity is the largest n the policy can admit (minimum over components).
func engCapacity(p ratelimit.Policy) int64 {
	switch v := p.(type) {
	case ratelimit.FixedWindow:
		return v.Limit
	case ratelimit.SlidingWindow:
		return v.Limit
	case ratelimit.TokenBucket:
		return v.Limit
	case ratelimit.GCRA:
		return v.Burst
	case ratelimit.Composite:
		c := int64(-1)
		for _, x := range v.Components {
			if l := engCapacity(x); c < 0 || l < c {
				c = l
			}
		}
		return c
	}
	return 0
}
