package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// replyLen is the number of integers of a decide reply, a status row of luakit's reply convention:
// status (luakit.StatusOK allowed, StatusBusy rejected, StatusAbsent a probe of an absent key, which
// is allowed), remaining, retryAfter µs, reset µs, component, server time µs.
const replyLen = 6

// script returns the script deciding and migrating c's layout.
func (c *compiled) script() *luakit.Script {
	if c.algo == algoGCRA {
		return gcraScript
	}
	return componentsScript
}

// run is compiled.decide.
func (c *compiled) run(ctx context.Context, client rueidis.Client, key string, n int64) (decision, error) {
	switch {
	case n < 0:
		return decision{}, fmt.Errorf("%w: %d", ErrNegativePermits, n)
	case n > c.cap:
		return decision{limit: c.cap, component: c.capIdx}, nil
	}
	if err := ctx.Err(); err != nil {
		return decision{}, fmt.Errorf("ratelimit: decide: %w", err)
	}
	var args []string
	switch n {
	case 0:
		args = c.argsProbe
	case 1:
		args = c.argsOne
	default:
		args = c.decideArgs(strconv.FormatInt(n, 10))
	}
	ctx, stop := luakit.WithoutDeadline(ctx)
	res := c.script().Exec(ctx, client, []string{key}, args)
	stop()
	d, err := c.decodeResult(res)
	if err == nil && !d.allowed && n > d.limit {
		// A keyed decision applied stored settings (of a higher version) whose capacity is below n:
		// no retry can succeed, so no retry hint, as for n above c's own capacity.
		d.retryAfter = 0
	}
	return d, err
}

// decodeResult decodes the reply of a decide (or read-only inspect) script.
func (c *compiled) decodeResult(res rueidis.RedisResult) (decision, error) {
	arr, err := res.ToArray()
	if err != nil {
		return decision{}, engineError(err)
	}
	var v [replyLen + 1]int64
	// A keyed decision may apply stored settings: its reply then adds the controlling component's
	// limit (always for the hash layouts; for GCRA only when the stored settings were adopted).
	keyedLimit := c.keyed && (c.algo != algoGCRA || len(arr) == replyLen+1)
	want := replyLen
	if keyedLimit {
		want++
	}
	if len(arr) != want {
		return decision{}, fmt.Errorf("ratelimit: decide script replied %d elements, want %d", len(arr), want)
	}
	for i := range arr {
		if v[i], err = arr[i].AsInt64(); err != nil {
			return decision{}, fmt.Errorf("ratelimit: decide script reply element %d: %w", i, err)
		}
	}
	if keyedLimit {
		return c.decodeKeyedReply(v)
	}
	return c.decodeReply([replyLen]int64(v[:replyLen]))
}

// decodeKeyedReply decodes a keyed decide reply, whose last element is the limit of the controlling
// component of the settings applied (the stored ones when adopted, which may have another component
// count).
func (c *compiled) decodeKeyedReply(v [replyLen + 1]int64) (decision, error) {
	limit := v[replyLen]
	if limit < 1 || limit > MaxLimit {
		return decision{}, fmt.Errorf("ratelimit: decide reply: limit %d", limit)
	}
	d, err := checkReply([replyLen]int64(v[:replyLen]), MaxComponents)
	if err != nil {
		return decision{}, err
	}
	d.limit = limit
	return d, nil
}

// decodeReply converts the integers of a decide reply into a decision, checking every value's range.
func (c *compiled) decodeReply(v [replyLen]int64) (decision, error) {
	ncomp := int64(len(c.comps))
	if c.algo == algoGCRA {
		ncomp = 1
	}
	d, err := checkReply(v, ncomp)
	if err != nil {
		return decision{}, err
	}
	if c.algo == algoGCRA {
		d.limit = c.burst
	} else {
		d.limit = c.comps[d.component].limit
	}
	return d, nil
}

// checkReply converts the integers of a decide reply of ncomp components into a decision without
// its limit, checking every value's range.
func checkReply(v [replyLen]int64, ncomp int64) (decision, error) {
	status, remaining, retry, reset, comp, now := v[0], v[1], v[2], v[3], v[4], v[5]
	switch {
	case status != luakit.StatusOK && status != luakit.StatusBusy && status != luakit.StatusAbsent:
		return decision{}, fmt.Errorf("ratelimit: decide reply: status is %d", status)
	case remaining < 0 || remaining > MaxLimit:
		return decision{}, fmt.Errorf("ratelimit: decide reply: remaining is %d", remaining)
	case retry < 0 || retry > maxReply || (status != luakit.StatusBusy && retry != 0):
		return decision{}, fmt.Errorf("ratelimit: decide reply: retry after %d µs (status %d)", retry, status)
	case reset < 0 || reset > maxReply:
		return decision{}, fmt.Errorf("ratelimit: decide reply: reset %d µs", reset)
	case comp < 0 || comp >= ncomp:
		return decision{}, fmt.Errorf("ratelimit: decide reply: component %d of %d", comp, ncomp)
	case now <= 0 || now > maxReply:
		return decision{}, fmt.Errorf("ratelimit: decide reply: server time %d µs", now)
	}
	d := decision{
		allowed:    status != luakit.StatusBusy,
		absent:     status == luakit.StatusAbsent,
		remaining:  remaining,
		retryAfter: time.Duration(retry) * time.Microsecond,
		reset:      time.Duration(reset) * time.Microsecond,
		component:  int(comp),
		at:         time.UnixMicro(now),
	}
	return d, nil
}

// convert is compiled.migrate.
func (c *compiled) convert(ctx context.Context, client rueidis.Client, key string, to *compiled) error {
	if err := c.compatible(to); err != nil {
		return err
	}
	if c.equal(to) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: migrate: %w", err)
	}
	var args []string
	if c.algo == algoGCRA {
		args = []string{"m", strconv.FormatInt(c.emission, 10), strconv.FormatInt(to.emission, 10)}
	} else {
		args = make([]string, 0, 1+len(c.block)+len(to.block))
		args = append(args, "m")
		args = append(args, c.block...)
		args = append(args, to.block...)
	}
	ctx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	if err := c.script().Exec(ctx, client, []string{key}, args).Error(); err != nil {
		return engineError(err)
	}
	return nil
}

// engineError maps the error of a script call: the scripts' own error replies (RLFOREIGN,
// RLMISMATCH, RLDEBT; the reply kept as detail) and the server's WRONGTYPE to the package's errors,
// other server replies as they are (the script did not run or failed before writing), and a failure
// after the command may have been sent to ErrUncertain. Every result has the "ratelimit: " prefix.
func engineError(err error) error {
	var re *rueidis.RedisError
	if errors.As(err, &re) && !re.IsNil() {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, "RLFOREIGN"), strings.HasPrefix(msg, "WRONGTYPE"):
			return fmt.Errorf("ratelimit: %w: %w", ErrForeignData, err)
		case strings.HasPrefix(msg, "RLMISMATCH"):
			return fmt.Errorf("%w: %w", ErrConfigMismatch, err)
		case strings.HasPrefix(msg, "RLDEBT"):
			return fmt.Errorf("%w: %w", ErrDebtOverflow, err)
		}
		return fmt.Errorf("ratelimit: server error: %w", err)
	}
	if luakit.NotSent(err) {
		return fmt.Errorf("ratelimit: %w", err)
	}
	switch luakit.Classify(err) {
	case luakit.ClassUncertain, luakit.ClassUnknown:
		return fmt.Errorf("ratelimit: %w: %w", ErrUncertain, err)
	}
	return fmt.Errorf("ratelimit: %w", err)
}
