package counter_test

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/testkit"
)

// sentinelMaster is the master set name the test's sentinels monitor.
const sentinelMaster = "coordkit"

// TestCounterSentinel runs the counter's behaviour through a rueidis Sentinel client: for each selected
// standalone target, a primary, a replica and three sentinels (redis-server / valkey-server
// --sentinel) started by the test. The client finds the primary through the sentinels; limit checks,
// batches, multi-key reads and exact 64-bit values work, every write is on the primary and replicates,
// and a batch is one EVALSHA per item.
func TestCounterSentinel(t *testing.T) {
	for _, st := range matrix.Targets() {
		if st.Cluster {
			continue
		}
		t.Run(st.Name, func(t *testing.T) {
			matrix.TakeSlot(t)
			testSentinel(t, st.Server)
		})
	}
}

func testSentinel(t *testing.T, target testkit.Target) {
	c := ctx(t)
	r := testkit.StartReplicated(t, target)
	bin, err := testkit.Binary(target)
	require.NoError(t, err)
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = startSentinel(t, bin, r.Primary.Addr)
	}
	t.Logf("target %s: %s %s primary %s, replica %s, sentinels %v", target, r.Primary.Flavor, r.Primary.Version,
		r.Primary.Addr, r.Replica.Addr, addrs)

	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		Sentinel:     rueidis.SentinelOption{MasterSet: sentinelMaster},
		DisableCache: true,
	})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	require.Equal(t, rueidis.ClientModeSentinel, cl.Mode())
	s := newStore(t, cl, counter.WithKeyPrefix("ck:sentinel:"))

	res, err := s.IncrementUpTo(c, "limit", 3, 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: 3, TTL: res.TTL}, res)
	require.True(t, res.TTL > 0 && res.TTL <= time.Minute)
	for range 2 {
		res, err = s.IncrementUpTo(c, "limit", 3, 10, time.Minute)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	res, err = s.IncrementUpTo(c, "limit", 3, 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: false, Value: 9, TTL: res.TTL}, res, "9+3 > 10 is refused")
	dec, err := s.DecrementDownTo(c, "limit", 9, 0)
	require.NoError(t, err)
	require.Equal(t, counter.DecrementResult{Allowed: true, Value: 0, Remaining: 0}, dec)

	big := int64(math.MaxInt64 - 10)
	v, err := s.IncrementWithExpire(c, "big", big, 0)
	require.NoError(t, err)
	require.Equal(t, big, v)
	_, err = s.IncrementWithExpire(c, "big", 11, 0)
	require.ErrorIs(t, err, counter.ErrOverflow)

	const n = 20
	items := make([]counter.Increment, n)
	keys := make([]string, n)
	for i := range items {
		keys[i] = fmt.Sprintf("b\x00%d", i)
		items[i] = counter.Increment{Key: keys[i], Delta: int64(i + 1)}
	}
	_, err = s.BatchIncrement(c, items)
	require.NoError(t, err)
	before, err := r.Primary.CommandStats(c)
	require.NoError(t, err)
	vals, err := s.BatchIncrement(c, items)
	require.NoError(t, err)
	after, err := r.Primary.CommandStats(c)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"evalsha": n}, commandsDelta(before, after), "a batch is one EVALSHA per item on the primary")
	many, err := s.GetMany(c, keys)
	require.NoError(t, err)
	for i := range keys {
		require.EqualValues(t, 2*(i+1), vals[i])
		require.Equal(t, counter.Value{N: int64(2 * (i + 1)), Exists: true}, many[i])
	}

	require.NoError(t, r.WaitSync(c))
	for _, srv := range []*testkit.Server{r.Primary, r.Replica} {
		m, err := srv.Do(c, "GET", "ck:sentinel:big")
		require.NoError(t, err)
		got, err := m.ToString()
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(big, 10), got, "on %s", srv.Addr)
		m, err = srv.Do(c, "GET", "ck:sentinel:b\x0019")
		require.NoError(t, err)
		got, err = m.ToString()
		require.NoError(t, err)
		require.Equal(t, "40", got, "on %s", srv.Addr)
	}
	require.NoError(t, s.Close(c))
	require.NoError(t, cl.Do(c, cl.B().Ping().Build()).Error(), "Close keeps the caller's Sentinel client")
}

// startSentinel starts one sentinel process monitoring primary (quorum 2) on a free loopback port,
// killed at t.Cleanup, and returns its address once it answers PING.
func startSentinel(t *testing.T, bin, primary string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(primary)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	_, sport, _ := net.SplitHostPort(addr)
	require.NoError(t, l.Close())
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
		"port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 5000\n",
		sport, dir, sentinelMaster, host, port, sentinelMaster)), 0o600))
	logf, err := os.Create(filepath.Join(dir, "sentinel.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sentinel %s log:\n%s", addr, b)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if sentinelPing(addr) == nil {
			return addr
		}
		require.True(t, time.Now().Before(deadline), "sentinel %s did not answer PING", addr)
		time.Sleep(20 * time.Millisecond)
	}
}

// sentinelPing sends one inline PING to addr and reads +PONG.
func sentinelPing(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("reply %q", line)
	}
	return nil
}
