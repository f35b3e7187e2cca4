package ratelimit

import (
	"strings"
	"testing"
	"time"
)

// FuzzDecodeReply checks that any six integers either decode into a decision within the documented
// ranges or are rejected, never panicking.
func FuzzDecodeReply(f *testing.F) {
	f.Add(int64(1), int64(3), int64(0), int64(2000000), int64(1), int64(1796069434113456))
	f.Add(int64(0), int64(0), int64(250), int64(900), int64(0), int64(1796069434113456))
	f.Add(int64(0), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1))
	f.Add(int64(1), int64(MaxLimit+1), int64(maxReply+1), int64(maxReply), int64(2), int64(maxReply))
	c, err := compile(Composite{Components: []Component{
		FixedWindow{Limit: 9, Window: time.Second},
		TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Second},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, allowed, remaining, retry, reset, comp, now int64) {
		d, err := c.decodeReply([replyLen]int64{allowed, remaining, retry, reset, comp, now})
		if err != nil {
			return
		}
		switch {
		case d.remaining < 0, d.retryAfter < 0, d.reset < 0, d.at.IsZero():
			t.Fatalf("out of range: %+v", d)
		case d.allowed && d.retryAfter != 0:
			t.Fatalf("allowed with RetryAfter: %+v", d)
		case d.component < 0 || d.component >= len(c.comps) || d.limit != c.comps[d.component].limit:
			t.Fatalf("component: %+v", d)
		case d.at.UnixMicro() != now, d.retryAfter != time.Duration(retry)*time.Microsecond, d.reset != time.Duration(reset)*time.Microsecond:
			t.Fatalf("server time %d decoded as %v", now, d.at)
		}
	})
}

// FuzzSignature checks the configuration signature: two composites have the same signature exactly
// when their rounded settings are equal in the same order, and the signature is deterministic.
func FuzzSignature(f *testing.F) {
	f.Add(uint8(0), int64(10), int64(1000000000), int64(2), uint8(1), int64(10), int64(1000000000), int64(2))
	f.Add(uint8(1), int64(1), int64(1500000), int64(3), uint8(1), int64(1), int64(2000000), int64(3))
	f.Add(uint8(2), int64(12), int64(1), int64(34), uint8(2), int64(123), int64(1), int64(4))
	f.Fuzz(func(t *testing.T, k1 uint8, l1, d1, x1 int64, k2 uint8, l2, d2, x2 int64) {
		mk := func(k uint8, l, d, x int64) Component {
			switch k % 3 {
			case 0:
				return FixedWindow{Limit: l, Window: time.Duration(d)}
			case 1:
				return SlidingWindow{Limit: l, Window: time.Duration(d), Segments: int(x % 2048)}
			}
			return TokenBucket{Limit: l, TokensPerPeriod: x, Period: time.Duration(d)}
		}
		a, errA := compile(Composite{Components: []Component{mk(k1, l1, d1, x1)}})
		b, errB := compile(Composite{Components: []Component{mk(k2, l2, d2, x2)}})
		if errA != nil || errB != nil {
			return
		}
		again, err := compile(Composite{Components: []Component{mk(k1, l1, d1, x1)}})
		if err != nil || again.sig != a.sig {
			t.Fatalf("signature not deterministic: %q vs %q (%v)", a.sig, again.sig, err)
		}
		same := a.comps[0] == b.comps[0]
		if same != (a.sig == b.sig) || same != a.equal(b) {
			t.Fatalf("settings %+v and %+v: signatures %q and %q", a.comps[0], b.comps[0], a.sig, b.sig)
		}
		if strings.ContainsAny(a.sig, " \n\r\x00") {
			t.Fatalf("signature %q holds a separator byte", a.sig)
		}
		if a.capacity() != a.comps[0].limit {
			t.Fatalf("capacity %d, limit %d", a.capacity(), a.comps[0].limit)
		}
	})
}
