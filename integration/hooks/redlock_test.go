package hooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/testkit"
)

// testRedlockHookRules checks the group rules on three real servers: the group operation is admitted
// once, before any node work; rejected renewal and release keep the lock on every node; a rejected
// Close propagates and can be retried.
func testRedlockHookRules(t *testing.T, e *env) {
	target := e.target.Server
	var servers []*testkit.Server
	var clients []rueidis.Client
	for range 3 {
		s := testkit.Start(t, target)
		servers = append(servers, s)
		clients = append(clients, s.Client(t))
	}
	ctx := context.Background()
	j := &journal{}
	g, err := redlock.NewGroup(clients, redlock.WithHooks(j), redlock.WithInstance("group"), redlock.WithRestartQuarantine(false))
	if err != nil {
		t.Fatal(err)
	}
	onNodes := func(key string) int {
		n := 0
		for i := range servers {
			if exists(t, clients[i], key) {
				n++
			}
		}
		return n
	}

	j.setReject("REDLOCK TRY ACQUIRE")
	if _, err := g.TryAcquire(ctx, "rl", time.Minute); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("TryAcquire = %v", err)
	}
	if n := onNodes("rl"); n != 0 {
		t.Fatalf("a rejected acquisition reached %d nodes", n)
	}
	j.setReject()
	l, err := g.TryAcquire(ctx, "rl", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	j.setReject("REDLOCK EXTEND", "REDLOCK RELEASE", "REDLOCK CLOSE")
	if ok, err := l.Extend(ctx); ok || err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Extend = %v %v", ok, err)
	}
	if _, err := l.Release(ctx); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Release = %v", err)
	}
	if err := l.Close(); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Close = %v", err)
	}
	if n := onNodes("rl"); n != 3 || l.Err() != nil {
		t.Fatalf("after rejections the lock is on %d nodes, handle %v; want 3 and live", n, l.Err())
	}
	j.setReject()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := onNodes("rl"); n != 0 {
		t.Fatalf("the retried Close left the lock on %d nodes", n)
	}
	expect(t, j, "admit REDLOCK TRY ACQUIRE", "admit REDLOCK TRY ACQUIRE", "done REDLOCK TRY ACQUIRE succeeded",
		"admit REDLOCK EXTEND", "admit REDLOCK RELEASE", "admit REDLOCK CLOSE",
		"admit REDLOCK CLOSE", "done REDLOCK CLOSE succeeded")
}
