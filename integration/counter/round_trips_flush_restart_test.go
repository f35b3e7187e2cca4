package counter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
)

// scriptInner lists the commands the counter's scripts call: INFO commandstats counts them too, but
// they are not sent by the client.
var scriptInner = map[string]bool{
	"get": true, "incrby": true, "decrby": true, "pexpire": true, "pttl": true, "type": true,
	"multi": true, "exec": true, // how a replica counts a script's replicated effects
}

// sent returns, per command, what the client sent since before (a CommandStats reading): the
// target's commands since then (matrix.Env.CommandsSince: without its background commands, such as
// handshakes of the connections rueidis dials lazily, topology reads, a Sentinel group's own
// traffic) without the commands called inside the counter's scripts. (A store's first-contact EXISTS
// is outside the counted spans: each store is warmed first.)
func sent(t *testing.T, e *env, before map[string]int64) map[string]int64 {
	t.Helper()
	d := e.CommandsSince(t, before)
	for k := range scriptInner {
		delete(d, k)
	}
	return d
}

// spreadKeys returns n logical keys under prefix whose physical keys cover every primary of a
// cluster (in practice: n distinct slots).
func spreadKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return keys
}

// testOneRoundTrip: with the scripts cached, a limit check is one command on the server and a batch
// of n items is n EVALSHA and nothing else (no SCRIPT LOAD before it: rueidis' Lua.ExecMulti sent
// one per node before every batch).
func testOneRoundTrip(t *testing.T, e *env) {
	matrix.WaitServing(t, e.Raw)
	s := e.store(t, counter.WithKeyPrefix("ck:rt:"))
	c := ctx(t)
	const n = 30
	items := make([]counter.Increment, n)
	for i, k := range spreadKeys("b", n) {
		items[i] = counter.Increment{Key: k, Delta: 2}
	}
	// Warm up: every script cached on every node, every connection dialled.
	_, err := s.IncrementUpTo(c, "limit", 1, 100, time.Minute)
	require.NoError(t, err)
	_, err = s.BatchIncrement(c, items)
	require.NoError(t, err)

	before := e.CommandStats(t)
	res, err := s.IncrementUpTo(c, "limit", 1, 100, time.Minute)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.EqualValues(t, 2, res.Value)
	require.Equal(t, map[string]int64{"evalsha": 1}, sent(t, e, before),
		"a limit check is one EVALSHA")

	for round := range 3 {
		before = e.CommandStats(t)
		vals, err := s.BatchIncrement(c, items)
		require.NoError(t, err)
		for i, v := range vals {
			require.EqualValues(t, 2*(round+2), v, "item %d", i)
		}
		require.Equal(t, map[string]int64{"evalsha": n}, sent(t, e, before),
			"a batch of %d items with the script cached is %d EVALSHA in one pipeline, nothing else", n, n)
	}
}

// testBatchAfterScriptFlush: after SCRIPT FLUSH on every node a batch still succeeds, every item
// applied once (the NOSCRIPT items are re-sent with EVAL), as a single call does; the next batch is
// back to EVALSHA only.
func testBatchAfterScriptFlush(t *testing.T, e *env) {
	s := e.store(t, counter.WithKeyPrefix("ck:flush:"))
	c := ctx(t)
	const n = 30
	keys := spreadKeys("b", n)
	items := make([]counter.Increment, n)
	for i, k := range keys {
		items[i] = counter.Increment{Key: k, Delta: int64(i + 1), TTL: time.Minute}
	}
	_, err := s.BatchIncrement(c, items)
	require.NoError(t, err)
	flushScripts := func() {
		for _, node := range e.Nodes {
			_, err := node.Do(c, "SCRIPT", "FLUSH")
			require.NoError(t, err)
		}
	}

	flushScripts()
	before := e.CommandStats(t)
	vals, err := s.BatchIncrement(c, items)
	require.NoError(t, err, "a batch after SCRIPT FLUSH must recover like a single call")
	for i, v := range vals {
		require.EqualValues(t, 2*(i+1), v, "item %d applied exactly once", i)
	}
	d := sent(t, e, before)
	require.EqualValues(t, n, d["evalsha"], "every item tried EVALSHA first: %v", d)
	require.EqualValues(t, n, d["eval"], "every NOSCRIPT item re-sent once with EVAL: %v", d)
	require.Zero(t, d["script|load"], "no SCRIPT LOAD: %v", d)
	for i, k := range keys {
		e.requireValue(t, "ck:flush:"+k, fmt.Sprint(2*(i+1)))
	}

	before = e.CommandStats(t)
	_, err = s.BatchIncrement(c, items)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"evalsha": n}, sent(t, e, before),
		"EVAL cached the script again: the next batch is EVALSHA only")

	flushScripts()
	v, err := s.IncrementWithExpire(c, keys[0], 1, 0)
	require.NoError(t, err, "a single call after SCRIPT FLUSH")
	require.EqualValues(t, 4, v)
}

// testBinaryKeys: keys and the prefix are bytes, not text: NUL, CR LF, 0xff and a hash tag reach the
// server byte for byte through every operation (read back with the assertion client).
func testBinaryKeys(t *testing.T, e *env) {
	const prefix = "ck:\x00bin\xff:"
	s := e.store(t, counter.WithKeyPrefix(prefix))
	c := ctx(t)
	keys := []string{"a\x00b", "{t\r\n}\xfe", "\xff\xff", "x\x00"}
	for i, k := range keys {
		v, err := s.IncrementWithExpire(c, k, int64(10+i), time.Minute)
		require.NoError(t, err)
		require.EqualValues(t, 10+i, v)
		res, err := s.IncrementUpTo(c, k, 1, 1000, 0)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		dec, err := s.DecrementDownTo(c, k, 1, 0)
		require.NoError(t, err)
		require.True(t, dec.Allowed)
		got, err := s.Get(c, k)
		require.NoError(t, err)
		require.EqualValues(t, 10+i, got)
	}
	items := make([]counter.Increment, len(keys))
	for i, k := range keys {
		items[i] = counter.Increment{Key: k, Delta: 100}
	}
	_, err := s.BatchIncrement(c, items)
	require.NoError(t, err)
	many, err := s.GetMany(c, keys)
	require.NoError(t, err)
	for i, k := range keys {
		require.Equal(t, counter.Value{N: int64(110 + i), Exists: true}, many[i])
		e.requireValue(t, prefix+k, fmt.Sprint(110+i))
		p := e.PTTL(t, prefix+k)
		require.True(t, p > 0 && p <= 60000, "PTTL %d", p)
	}
	// Nothing at the keys a text-minded encoding would have produced.
	for _, k := range []string{"ck:bin:a", "ck:\x00bin\ufffd:\ufffd\ufffd", prefix + "a", prefix + "x"} {
		_, ok := e.get(t, k)
		require.False(t, ok, "key %q must not exist", k)
	}
}

// testCloseKeepsClient: Close of a Store, a Buffered and a Bounded never closes the caller's client:
// the client answers afterwards and a new Store over it works.
func testCloseKeepsClient(t *testing.T, e *env) {
	c := ctx(t)
	cl := e.NewClient(t, nil, matrix.NoCache)
	s, err := counter.New(cl, counter.WithKeyPrefix("ck:close-client:"))
	require.NoError(t, err)
	buf, err := counter.NewBuffered(s, "buf")
	require.NoError(t, err)
	require.NoError(t, buf.Add(3))
	bnd, err := counter.NewBounded(s, "bnd", 100, counter.WithChunk(10))
	require.NoError(t, err)
	ok, err := bnd.TryAdd(c, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, buf.Close(c))
	require.NoError(t, bnd.Close(c))
	require.NoError(t, s.Close(c))
	require.NoError(t, s.Close(c))

	require.NoError(t, cl.Do(c, cl.B().Ping().Build()).Error(), "the client must still work after every Close")
	s2 := newStore(t, cl, counter.WithKeyPrefix("ck:close-client:"))
	v, err := s2.IncrementWithExpire(c, "buf", 1, 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, v, "the buffered delta was flushed by Close")
	e.requireValue(t, "ck:close-client:bnd", "1")
}

// testBufferedRebuffer: a flush that certainly wrote nothing (the key holds foreign data) puts its
// delta back and a later flush applies it once; a flush whose outcome is uncertain (the server is
// paused, the flush's ctx ends) is dropped, never re-sent, so the delta counts at most once.
func testBufferedRebuffer(t *testing.T, e *env) {
	const key = "ck:rebuffer"
	c := ctx(t)
	s := e.store(t)
	b, err := counter.NewBuffered(s, key, counter.WithFlushInterval(time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })

	e.set(t, key, "not a number")
	require.NoError(t, b.Add(5))
	err = b.Flush(c)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	require.NotErrorIs(t, err, counter.ErrUncertain)
	require.EqualValues(t, 5, b.Pending(), "a flush that wrote nothing re-buffers its delta")
	e.requireValue(t, key, "not a number")

	require.NoError(t, e.Raw.Do(c, e.Raw.B().Del().Key(key).Build()).Error())
	require.NoError(t, b.Flush(c))
	require.Zero(t, b.Pending())
	e.requireValue(t, key, "5")

	node := e.Srv
	if e.IsCluster() {
		node, err = e.Cluster.PrimaryOf(c, int(luakit.Slot(key)))
		require.NoError(t, err)
	}
	require.NoError(t, b.Add(7))
	node.MustPause(t)
	fctx, cancel := context.WithTimeout(c, 300*time.Millisecond)
	err = b.Flush(fctx)
	cancel()
	node.MustResume(t)
	require.ErrorIs(t, err, counter.ErrUncertain, "the paused server never replied")
	require.Zero(t, b.Pending(), "an uncertain flush is not re-buffered")
	matrix.WaitServing(t, e.Raw)
	require.Eventually(t, s.Connected, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, b.Flush(c), "nothing pending: nothing sent")
	v, ok := e.get(t, key)
	require.True(t, ok)
	require.Contains(t, []string{"5", "12"}, v, "the uncertain delta counted at most once")
	t.Logf("uncertain flush on %s: the paused server %s it", e.Name, map[string]string{"5": "never applied", "12": "applied"}[v])
}

// testCreatedWhileDown: a Store created while the server (on Cluster: the key's primary) is down
// fails its first call with ErrDisconnected, not uncertain (the store's first-contact read met the
// broken connection or the refused dial, and the command was not sent), then fails fast without touching the client, and works again after the restart without any
// action. On standalone the client itself is also created while the server is down
// (ForceSingleClient, which makes rueidis return a client whose dial failed).
func testCreatedWhileDown(t *testing.T, e *env) {
	const key = "ck:created-down"
	c := ctx(t)
	node := e.Srv
	var err error
	if e.IsCluster() {
		node, err = e.Cluster.PrimaryOf(c, int(luakit.Slot(key)))
		require.NoError(t, err)
	}
	warm := e.NewClient(t, nil, matrix.NoCache) // created while up: its connection breaks with the kill
	require.NoError(t, warm.Do(c, warm.B().Exists().Key(key).Build()).Error())
	node.MustKill(t)

	clients := []rueidis.Client{warm}
	if !e.IsCluster() {
		opt := e.ClientOption()
		opt.DisableCache = true
		opt.ForceSingleClient = true
		cold, err := rueidis.NewClient(opt)
		require.Error(t, err, "the server is down: the client's dial fails")
		require.NotNil(t, cold, "ForceSingleClient returns the client anyway")
		t.Cleanup(cold.Close)
		clients = append(clients, cold)
	}
	stores := make([]*counter.Store, len(clients))
	for i, cl := range clients {
		stores[i] = newStore(t, cl, counter.WithProbeInterval(50*time.Millisecond), counter.WithProbeTimeout(500*time.Millisecond))
		_, err := stores[i].IncrementUpTo(c, key, 1, 10, 0)
		require.ErrorIs(t, err, counter.ErrDisconnected, "client %d: first call", i)
		require.NotErrorIs(t, err, counter.ErrUncertain, "client %d: a refused dial sent nothing", i)
		require.False(t, stores[i].Connected(), "client %d: the store knows it is disconnected", i)
		for range 5 {
			_, err := stores[i].IncrementWithExpire(c, key, 1, 0)
			require.ErrorIs(t, err, counter.ErrDisconnected)
			require.NotErrorIs(t, err, counter.ErrUncertain, "refused before the client")
		}
	}

	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, node.Restart(rctx))
	matrix.WaitServing(t, e.Raw)
	for i, s := range stores {
		require.Eventually(t, s.Connected, 30*time.Second, 10*time.Millisecond, "client %d: the probe connects", i)
		var res counter.Result
		require.Eventually(t, func() bool {
			res, err = s.IncrementUpTo(c, key, 1, 10, 0)
			return err == nil
		}, 20*time.Second, 20*time.Millisecond, "client %d: calls succeed again without action: %v", i, err)
		require.True(t, res.Allowed)
	}
	e.requireValue(t, key, fmt.Sprint(len(stores)))
}
