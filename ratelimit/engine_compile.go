package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// algo is the algorithm of a compiled policy or component.
type algo uint8

const (
	algoFixed algo = iota + 1
	algoSliding
	algoBucket
	algoGCRA
	algoComposite
)

// String returns the algorithm's name as used in error messages.
func (a algo) String() string {
	switch a {
	case algoFixed:
		return "FixedWindow"
	case algoSliding:
		return "SlidingWindow"
	case algoBucket:
		return "TokenBucket"
	case algoGCRA:
		return "GCRA"
	case algoComposite:
		return "Composite"
	}
	return "algo(" + strconv.Itoa(int(a)) + ")"
}

// component is one validated fixed window, sliding window or token bucket, durations in whole µs.
type component struct {
	algo     algo
	limit    int64
	window   int64 // fixed and sliding window
	segments int64 // sliding window, normalised (0 became DefaultSegments)
	width    int64 // sliding window segment width: ceil(window / segments)
	tokens   int64 // token bucket tokens per period
	period   int64 // token bucket refill period
}

// maxSpan is the largest time span in µs a policy may need the scripts to add to the server time:
// a duration, a GCRA's Burst × EmissionInterval, a token bucket's full refill, a migrated debt
// (2^51 µs, about 71 years). The scripts compute in Lua doubles, exact below 2^53: the server time
// in µs (about 1.8·10^15 today) plus twice maxSpan stays below 2^53 until about 2100.
const maxSpan = int64(1) << 51

// maxReply bounds the µs values of a decide reply (RetryAfter and Reset at most twice maxSpan, the
// server time below 2^53).
const maxReply = int64(1) << 53

// ceilMicros rounds d (> 0) up to whole microseconds.
func ceilMicros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return us
}

// roundMicros is d rounded up to whole microseconds, as a Duration (d itself when d <= 0 or when
// rounding would overflow; compile rejects both).
func roundMicros(d time.Duration) time.Duration {
	if d <= 0 || d%time.Microsecond == 0 || d > math.MaxInt64-time.Microsecond {
		return d
	}
	return d - d%time.Microsecond + time.Microsecond
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidPolicy, field, fmt.Sprintf(format, args...))
}

func checkLimit(field string, v int64) error {
	if v < 1 || v > MaxLimit {
		return invalid(field, "is %d, want 1 to %d", v, MaxLimit)
	}
	return nil
}

func checkDuration(field string, d time.Duration) (int64, error) {
	if d < time.Microsecond {
		return 0, invalid(field, "is %v, want at least 1µs", d)
	}
	us := ceilMicros(d)
	if us > maxSpan {
		return 0, invalid(field, "is %v, want at most %v (2^51 µs: the scripts' arithmetic must stay exact)", d, time.Duration(maxSpan)*time.Microsecond)
	}
	return us, nil
}

// compileComponent validates one component; name prefixes the field names in errors.
func compileComponent(name string, p Policy) (component, error) {
	switch v := p.(type) {
	case FixedWindow:
		if err := checkLimit(name+".Limit", v.Limit); err != nil {
			return component{}, err
		}
		w, err := checkDuration(name+".Window", v.Window)
		if err != nil {
			return component{}, err
		}
		return component{algo: algoFixed, limit: v.Limit, window: w}, nil
	case *FixedWindow:
		if v == nil {
			return component{}, invalid(name, "is a nil *FixedWindow")
		}
		return compileComponent(name, *v)
	case SlidingWindow:
		if err := checkLimit(name+".Limit", v.Limit); err != nil {
			return component{}, err
		}
		w, err := checkDuration(name+".Window", v.Window)
		if err != nil {
			return component{}, err
		}
		seg := int64(v.Segments)
		if seg == 0 {
			seg = DefaultSegments
		}
		if seg < 1 || seg > MaxSegments {
			return component{}, invalid(name+".Segments", "is %d, want 1 to %d (0 means %d)", v.Segments, MaxSegments, DefaultSegments)
		}
		return component{algo: algoSliding, limit: v.Limit, window: w, segments: seg, width: (w + seg - 1) / seg}, nil
	case *SlidingWindow:
		if v == nil {
			return component{}, invalid(name, "is a nil *SlidingWindow")
		}
		return compileComponent(name, *v)
	case TokenBucket:
		if err := checkLimit(name+".Limit", v.Limit); err != nil {
			return component{}, err
		}
		if err := checkLimit(name+".TokensPerPeriod", v.TokensPerPeriod); err != nil {
			return component{}, err
		}
		per, err := checkDuration(name+".Period", v.Period)
		if err != nil {
			return component{}, err
		}
		periods := (v.Limit + v.TokensPerPeriod - 1) / v.TokensPerPeriod
		if periods > maxSpan/per {
			return component{}, invalid(name+".Period", "is %v: the full refill duration (%d periods) must be at most %v", v.Period, periods, time.Duration(maxSpan)*time.Microsecond)
		}
		return component{algo: algoBucket, limit: v.Limit, tokens: v.TokensPerPeriod, period: per}, nil
	case *TokenBucket:
		if v == nil {
			return component{}, invalid(name, "is a nil *TokenBucket")
		}
		return compileComponent(name, *v)
	case nil:
		return component{}, invalid(name, "is nil")
	}
	return component{}, invalid(name, "has unsupported type %T", p)
}

// compilePolicy is compile.
func compilePolicy(p Policy) (*compiled, error) {
	c := &compiled{src: p}
	switch v := p.(type) {
	case nil:
		return nil, invalid("policy", "is nil")
	case GCRA:
		if err := checkLimit("GCRA.Burst", v.Burst); err != nil {
			return nil, err
		}
		t, err := checkDuration("GCRA.EmissionInterval", v.EmissionInterval)
		if err != nil {
			return nil, err
		}
		if v.Burst > maxSpan/t {
			return nil, invalid("GCRA.EmissionInterval", "is %v: Burst × EmissionInterval must be at most %v", v.EmissionInterval, time.Duration(maxSpan)*time.Microsecond)
		}
		c.algo, c.burst, c.emission, c.cap = algoGCRA, v.Burst, t, v.Burst
	case *GCRA:
		if v == nil {
			return nil, invalid("policy", "is a nil *GCRA")
		}
		return compilePolicy(*v)
	case Composite:
		if len(v.Components) < 1 || len(v.Components) > MaxComponents {
			return nil, invalid("Composite.Components", "has %d components, want 1 to %d", len(v.Components), MaxComponents)
		}
		c.algo = algoComposite
		c.comps = make([]component, len(v.Components))
		for i, comp := range v.Components {
			cc, err := compileComponent("Composite.Components["+strconv.Itoa(i)+"]", comp)
			if err != nil {
				return nil, err
			}
			c.comps[i] = cc
		}
	case *Composite:
		if v == nil {
			return nil, invalid("policy", "is a nil *Composite")
		}
		return compilePolicy(*v)
	default:
		name := fmt.Sprintf("%T", p)
		name = strings.TrimPrefix(strings.TrimPrefix(name, "*"), "ratelimit.")
		cc, err := compileComponent(name, p)
		if err != nil {
			return nil, err
		}
		c.algo = cc.algo
		c.comps = []component{cc}
	}
	c.src = roundPolicy(p)
	c.finish()
	return c, nil
}

// roundPolicy returns p (a valid policy) with every duration rounded up to whole microseconds and
// a sliding window's Segments 0 replaced by DefaultSegments, as plain values: the settings enforced,
// which Policy reports.
func roundPolicy(p Policy) Policy {
	switch v := clonePolicy(p).(type) {
	case FixedWindow:
		v.Window = roundMicros(v.Window)
		return v
	case SlidingWindow:
		v.Window = roundMicros(v.Window)
		if v.Segments == 0 {
			v.Segments = DefaultSegments
		}
		return v
	case TokenBucket:
		v.Period = roundMicros(v.Period)
		return v
	case GCRA:
		v.EmissionInterval = roundMicros(v.EmissionInterval)
		return v
	case Composite:
		for i, c := range v.Components {
			if rc, ok := roundPolicy(c).(Component); ok {
				v.Components[i] = rc
			}
		}
		return v
	}
	return p
}

// finish computes the derived fields: capacity, signature and the script arguments.
func (c *compiled) finish() {
	if c.algo == algoGCRA {
		c.sig = "g" + strconv.FormatInt(c.burst, 10) + "/" + strconv.FormatInt(c.emission, 10)
		c.block = []string{strconv.FormatInt(c.burst, 10), strconv.FormatInt(c.emission, 10)}
	} else {
		c.cap = c.comps[0].limit
		for i, cc := range c.comps {
			if cc.limit < c.cap {
				c.cap, c.capIdx = cc.limit, i
			}
		}
		c.sig = signature(c.comps)
		stored := ""
		if c.algo == algoComposite {
			stored = c.sig
		}
		c.block = make([]string, 0, 3+4*len(c.comps))
		c.block = append(c.block, layoutTag(c.algo), stored, strconv.Itoa(len(c.comps)))
		for _, cc := range c.comps {
			switch cc.algo {
			case algoFixed:
				c.block = append(c.block, "f", strconv.FormatInt(cc.limit, 10), strconv.FormatInt(cc.window, 10), "0")
			case algoSliding:
				c.block = append(c.block, "s", strconv.FormatInt(cc.limit, 10), strconv.FormatInt(cc.window, 10), strconv.FormatInt(cc.width, 10))
			case algoBucket:
				c.block = append(c.block, "t", strconv.FormatInt(cc.limit, 10), strconv.FormatInt(cc.tokens, 10), strconv.FormatInt(cc.period, 10))
			}
		}
	}
	c.argsProbe = c.decideArgs("0")
	c.argsOne = c.decideArgs("1")
}

func (c *compiled) decideArgs(n string) []string {
	if c.keyed && c.algo == algoGCRA {
		// The keyed GCRA form has no mode argument: its suffix (keyedArgs[0], starting with "|")
		// comes first, then n; one argument fewer per call (see engine_gcra.lua).
		a := make([]string, 0, 1+len(c.keyedArgs))
		a = append(a, c.keyedArgs[0], n)
		return append(a, c.keyedArgs[1:]...)
	}
	if c.keyed {
		a := make([]string, 0, 2+len(c.keyedArgs))
		a = append(a, "k", n)
		return append(a, c.keyedArgs...)
	}
	a := make([]string, 0, 2+len(c.block))
	a = append(a, "d", n)
	return append(a, c.block...)
}

// layoutTag is the "L" field of a hash layout: it keeps limiters of different kinds from sharing a
// key.
func layoutTag(a algo) string {
	switch a {
	case algoFixed:
		return "fw"
	case algoSliding:
		return "sw"
	case algoBucket:
		return "tb"
	}
	return "cp"
}

// signature is the configuration signature of components: an ordered, deterministic text of each
// component's rounded settings, e.g. "v2|f100/60000000|s100/60000000/10|t10/2/1000000" (limit, then
// window µs and segments, or tokens per period and period µs). Two component lists have the same
// signature exactly when they have the same rounded settings in the same order.
func signature(comps []component) string {
	var b strings.Builder
	b.Grow(8 + 24*len(comps))
	b.WriteString("v2")
	for _, cc := range comps {
		b.WriteByte('|')
		switch cc.algo {
		case algoFixed:
			b.WriteByte('f')
			b.WriteString(strconv.FormatInt(cc.limit, 10))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(cc.window, 10))
		case algoSliding:
			b.WriteByte('s')
			b.WriteString(strconv.FormatInt(cc.limit, 10))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(cc.window, 10))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(cc.segments, 10))
		case algoBucket:
			b.WriteByte('t')
			b.WriteString(strconv.FormatInt(cc.limit, 10))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(cc.tokens, 10))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(cc.period, 10))
		}
	}
	return b.String()
}

// compatibleWith is compiled.compatible.
func compatibleWith(c, o *compiled) error {
	if c.algo != o.algo {
		return fmt.Errorf("%w: %v to %v", ErrInvalidUpdate, c.algo, o.algo)
	}
	if c.algo != algoComposite {
		return nil
	}
	if len(c.comps) != len(o.comps) {
		return fmt.Errorf("%w: composite of %d components to %d", ErrInvalidUpdate, len(c.comps), len(o.comps))
	}
	for i := range c.comps {
		if c.comps[i].algo != o.comps[i].algo {
			return fmt.Errorf("%w: component %d from %v to %v", ErrInvalidUpdate, i, c.comps[i].algo, o.comps[i].algo)
		}
	}
	return nil
}
