package testkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// A tiny RESP2 client for readiness probes and cluster setup: it needs no goroutines and no client
// state, so that probing a starting server in a loop leaves nothing behind.

type respError string

func (e respError) Error() string { return string(e) }

// rawDo sends one command on a fresh connection and returns the reply: string (simple or bulk),
// int64, []any, nil (null), or a respError as the error.
func rawDo(ctx context.Context, addr string, timeout time.Duration, args ...string) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl); rem < timeout {
			timeout = rem
		}
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("testkit: empty RESP line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			var re respError
			if err != nil && !errors.As(err, &re) {
				return nil, err
			}
			if err != nil {
				v = re
			}
			out[i] = v
		}
		return out, nil
	default:
		return nil, fmt.Errorf("testkit: unexpected RESP reply %q", line)
	}
}

// parseInfo parses an INFO reply into field → value.
func parseInfo(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// flavorVersion derives the real flavor and version from INFO server: Valkey reports
// valkey_version (Valkey 9 also reports redis_version:7.2.4 for compatibility).
func flavorVersion(info map[string]string) (Flavor, string, error) {
	if v := info["valkey_version"]; v != "" {
		return FlavorValkey, v, nil
	}
	if v := info["redis_version"]; v != "" {
		return FlavorRedis, v, nil
	}
	return "", "", errors.New("testkit: INFO server has neither valkey_version nor redis_version")
}
