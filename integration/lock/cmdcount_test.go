package lock_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// cmdCounter counts the commands one rueidis client writes, on every connection it dials, by parsing
// the RESP request stream (clients send each command as an array of bulk strings). Install it with
// ClientOption.DialCtxFn = counter.dial. It works on every server version (CLIENT LIST's tot-cmds does
// not exist on Redis 7.0) and on a cluster client, and sees only this client's traffic.
type cmdCounter struct {
	mu     sync.Mutex
	counts map[string]int64 // upper-case command name -> commands written
	broken string           // set when the stream was not RESP arrays of bulk strings
}

// counted returns the client mutation that makes c count a client's commands (its dialer), or none
// when c is nil: pass it to matrix.Env.NewClient.
func (c *cmdCounter) counted() []func(*rueidis.ClientOption) {
	if c == nil {
		return nil
	}
	return []func(*rueidis.ClientOption){func(o *rueidis.ClientOption) { o.DialCtxFn = c.dial }}
}

func newCmdCounter() *cmdCounter { return &cmdCounter{counts: map[string]int64{}} }

func (c *cmdCounter) dial(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	var (
		conn net.Conn
		err  error
	)
	if cfg != nil {
		conn, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
	} else {
		conn, err = d.DialContext(ctx, "tcp", dst)
	}
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

// snapshot returns a copy of the counts.
func (c *cmdCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

func (c *cmdCounter) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != "" {
		t.Fatalf("command counter could not parse the request stream: %s", c.broken)
	}
}

// delta returns after-before per command, and the sum over every command except PING. rueidis sends a
// background PING on each connection idle for Dialer.KeepAlive (1 s by default): a liveness probe, not
// a poll of the lease, so it is reported but not counted against the waiter.
func delta(before, after map[string]int64) (map[string]int64, int64) {
	d := map[string]int64{}
	var n int64
	for k, v := range after {
		if x := v - before[k]; x != 0 {
			d[k] = x
			if k != "PING" {
				n += x
			}
		}
	}
	return d, n
}

// waitQuiet waits until c has written, since the snapshot since, at least one need command (any
// command but PING when need is "") and then nothing for quiet, and returns the snapshot at that point.
// It fails the test when that takes longer than limit: a waiter that never goes quiet is polling.
func (c *cmdCounter) waitQuiet(t *testing.T, since map[string]int64, need string, quiet, limit time.Duration) map[string]int64 {
	t.Helper()
	end := time.Now().Add(limit)
	last := c.snapshot()
	lastChange := time.Now()
	for {
		time.Sleep(5 * time.Millisecond)
		cur := c.snapshot()
		if d, _ := delta(last, cur); len(d) > 0 {
			last, lastChange = cur, time.Now()
		}
		d, n := delta(since, last)
		if need != "" {
			n = d[need]
		}
		if n > 0 && time.Since(lastChange) >= quiet {
			return last
		}
		if time.Now().After(end) {
			d, _ := delta(since, cur)
			t.Fatalf("client did not go quiet within %v; commands since start: %v", limit, d)
		}
	}
}

type countingConn struct {
	net.Conn
	c   *cmdCounter
	buf []byte // unparsed tail of the request stream (guarded by c.mu)
}

// Write counts the commands in b before writing it: counting after the write would race with the
// reply, so a caller could see its command answered before it was counted.
func (cc *countingConn) Write(b []byte) (int, error) {
	cc.count(b)
	return cc.Conn.Write(b)
}

func (cc *countingConn) count(b []byte) {
	cc.c.mu.Lock()
	defer cc.c.mu.Unlock()
	if cc.c.broken != "" {
		return
	}
	cc.buf = append(cc.buf, b...)
	for {
		used, name, ok, perr := parseCommand(cc.buf)
		if perr != "" {
			cc.c.broken = perr
			return
		}
		if !ok {
			break
		}
		cc.c.counts[name]++
		cc.buf = cc.buf[used:]
	}
	if len(cc.buf) == 0 {
		cc.buf = nil
	}
}

// parseCommand parses one "*N\r\n($L\r\n<L bytes>\r\n){N}" request at the start of b. ok is false when b
// holds only part of it; problem is non-empty when b does not start with one.
func parseCommand(b []byte) (used int, name string, ok bool, problem string) {
	if len(b) == 0 {
		return 0, "", false, ""
	}
	if b[0] != '*' {
		return 0, "", false, "request does not start with '*': " + strconv.Quote(string(b[:min(len(b), 16)]))
	}
	n, pos, ok, problem := parseLen(b, 1)
	if !ok || problem != "" {
		return 0, "", false, problem
	}
	for i := 0; i < n; i++ {
		if pos >= len(b) {
			return 0, "", false, ""
		}
		if b[pos] != '$' {
			return 0, "", false, "argument is not a bulk string"
		}
		l, p, ok, problem := parseLen(b, pos+1)
		if !ok || problem != "" {
			return 0, "", false, problem
		}
		if p+l+2 > len(b) {
			return 0, "", false, ""
		}
		if i == 0 {
			name = strings.ToUpper(string(b[p : p+l]))
		}
		pos = p + l + 2
	}
	return pos, name, true, ""
}

// parseLen parses a decimal length terminated by CRLF starting at b[from].
func parseLen(b []byte, from int) (n, next int, ok bool, problem string) {
	i := bytes.Index(b[from:], []byte("\r\n"))
	if i < 0 {
		return 0, 0, false, ""
	}
	n, err := strconv.Atoi(string(b[from : from+i]))
	if err != nil || n < 0 {
		return 0, 0, false, "bad length " + strconv.Quote(string(b[from:from+i]))
	}
	return n, from + i + 2, true, ""
}
