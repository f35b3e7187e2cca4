package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/redlock"
)

// redlockACL is the example ACL line of redlock's README, verbatim: the test runs with exactly its
// commands, given on every node.
const redlockACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +set +get +type +pttl +pexpire +del +info +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// testLeastPrivilege runs every redlock operation (unfenced with the restart quarantine on, then
// fenced: acquisitions, Extend, ExtendTTL, Verify, Inspect, Release) as a user with exactly the documented
// ACL on all five nodes, then as users lacking one command each: the operation needing it fails with
// ErrNoPermission and writes nothing on any node (DUMP and expiry of every key unchanged).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../redlock/README.md", redlockACL)
	const ttl = 5 * time.Second
	// The quarantine counts a node only once its server has been up for the longest TTL requested:
	// wait for that, so that every node is in the quorum.
	for _, c := range e.raw {
		for {
			info, err := c.Do(ctx(t), c.B().Info().Section("server").Build()).ToString()
			require.NoError(t, err)
			_, rest, _ := strings.Cut(info, "uptime_in_seconds:")
			up, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
			if time.Duration(up)*time.Second > ttl+time.Second {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	me := &matrix.Env{Name: e.name, Srv: e.servers[0], Nodes: e.servers, Raw: e.raw[0]}
	const user = "acl-redlock"
	suite := func(fenced bool) func(t *testing.T, r *matrix.ACLRun) {
		return func(t *testing.T, r *matrix.ACLRun) {
			clients := []rueidis.Client{r.Client}
			for _, s := range e.servers[1:] {
				opt := s.ClientOption()
				opt.Username, opt.Password, opt.DisableCache = user, "any", true
				c, err := rueidis.NewClient(opt)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				clients = append(clients, c)
			}
			opts := []redlock.Option{redlock.WithKeyPrefix(r.Prefix), redlock.WithNodeTimeout(5 * time.Second)}
			if fenced {
				opts = append(opts, redlock.WithRestartQuarantine(false), redlock.WithFencing("fence"))
			}
			g, err := redlock.NewGroup(clients, opts...)
			require.NoError(t, err)
			var l *redlock.Lease
			_ = r.Step("try_acquire", func(ctx context.Context) error {
				var err error
				l, err = g.TryAcquire(ctx, "job", ttl)
				return err
			}) && r.Step("extend", func(ctx context.Context) error {
				_, err := l.Extend(ctx)
				return err
			}) && r.Step("extend_ttl", func(ctx context.Context) error {
				_, err := l.ExtendTTL(ctx, ttl)
				return err
			}) && r.Step("verify", func(ctx context.Context) error {
				_, err := l.Verify(ctx)
				return err
			}) && r.Step("inspect", func(ctx context.Context) error {
				_, err := g.Inspect(ctx, "job")
				return err
			}) && r.Step("release", func(ctx context.Context) error {
				_, err := l.Release(ctx)
				return err
			}) && r.Step("acquire", func(ctx context.Context) error {
				var err error
				l, err = g.Acquire(ctx, "job", ttl)
				return err
			}) && r.Step("release_again", func(ctx context.Context) error {
				_, err := l.Release(ctx)
				return err
			})
		}
	}
	// Unfenced with the restart quarantine on (the default), then fenced with it off (INFO is the
	// quarantine's alone): each its own runs, so that the fenced scripts meet every refusal too.
	t.Run("unfenced", func(t *testing.T) {
		// Inspect reads the lock key with TYPE, PTTL and GET, fenced or not.
		me.LeastPrivilege(t, user, "acl:redlock:*", rules, cmds, suite(false))
	})
	t.Run("fenced", func(t *testing.T) {
		drop := slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return c == "info" })
		me.LeastPrivilege(t, user, "acl:redlock:*", rules, drop, suite(true))
	})
}
