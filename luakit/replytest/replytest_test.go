package replytest_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestError(t *testing.T) {
	for _, tt := range []struct {
		reply string
		class luakit.Class
	}{
		{"NOPERM User app has no permissions to run the 'del' command", luakit.ClassTerminal},
		{"LOADING Redis is loading the dataset in memory", luakit.ClassTransient},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", luakit.ClassTerminal},
	} {
		err := replytest.Error(t, tt.reply)
		var re *rueidis.RedisError
		if !errors.As(err, &re) || re.Error() != tt.reply {
			t.Fatalf("Error(%q) = %#v, want a *rueidis.RedisError with that text", tt.reply, err)
		}
		if got := luakit.Classify(err); got != tt.class {
			t.Errorf("Classify(Error(%q)) = %v, want %v", tt.reply, got, tt.class)
		}
	}
	if !errors.Is(luakit.Permission(replytest.Error(t, "NOPERM x")), luakit.ErrNoPermission) {
		t.Error("a NOPERM reply does not match luakit.ErrNoPermission")
	}
}

// Msg builds each kind of reply as rueidis reads it, Array its elements, Cached a reply with cache
// life left.
func TestMsg(t *testing.T) {
	neg, minInt := replytest.Msg(t, -7), replytest.Msg(t, int64(math.MinInt64))
	if n, err := neg.AsInt64(); err != nil || n != -7 {
		t.Errorf("Msg(-7) = %d, %v", n, err)
	}
	if n, err := minInt.AsInt64(); err != nil || n != math.MinInt64 {
		t.Errorf("Msg(MinInt64) = %d, %v", n, err)
	}
	bulk, status := replytest.Msg(t, "a\x00b"), replytest.Msg(t, replytest.Status("OK"))
	if s, err := bulk.ToString(); err != nil || s != "a\x00b" {
		t.Errorf("Msg(bulk) = %q, %v", s, err)
	}
	if s, err := status.ToString(); err != nil || s != "OK" || !strings.Contains(status.String(), "simple string") {
		t.Errorf("Msg(Status) = %s, %q, %v, want a simple string", status.String(), s, err)
	}
	if m := replytest.Msg(t, nil); !m.IsNil() {
		t.Errorf("Msg(nil) = %s, want a null reply", m.String())
	}
	m := replytest.Msg(t, []any{1, "x", []any{"y"}})
	if arr, err := m.ToArray(); err != nil || len(arr) != 3 || !arr[2].IsArray() {
		t.Fatalf("Msg(array) = %s, %v", m.String(), err)
	}
	arr := replytest.Array(t, 2, "z")
	if n, _ := arr[0].AsInt64(); len(arr) != 2 || n != 2 {
		t.Fatalf("Array(2, \"z\") = %v", arr)
	}
	if s, _ := arr[1].ToString(); s != "z" {
		t.Fatalf("Array(2, \"z\")[1] = %q", s)
	}
	plain, cached := replytest.Msg(t, 1), replytest.Cached(t, 1, time.Minute)
	if ttl := plain.CachePTTL(); ttl != -1 {
		t.Errorf("Msg: CachePTTL = %d, want -1 (not cached)", ttl)
	}
	if ttl := cached.CachePTTL(); ttl <= 59_000 || ttl > 60_000 {
		t.Errorf("Cached(1m): CachePTTL = %d, want about 60000", ttl)
	}
}

// FailedWrites' Applied is the shared rule, and Client records what it was sent.
func TestFailedWritesAndClient(t *testing.T) {
	for _, fw := range replytest.FailedWrites(t) {
		if got := luakit.MayHaveApplied(fw.Err); got != fw.Applied {
			t.Errorf("%s: MayHaveApplied = %v, want %v", fw.Name, got, fw.Applied)
		}
		c := &replytest.Client{Err: fw.Err}
		if err := c.Do(t.Context(), c.B().Ping().Build()).Error(); !errors.Is(err, fw.Err) {
			t.Errorf("%s: Do = %v, want %v", fw.Name, err, fw.Err)
		}
		if got := c.Sent(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "PING" {
			t.Errorf("%s: Sent = %q", fw.Name, got)
		}
	}
}

// NoIO reports its mode, standalone by default, and panics on any I/O.
func TestNoIO(t *testing.T) {
	if got := (replytest.NoIO{}).Mode(); got != rueidis.ClientModeStandalone {
		t.Errorf("NoIO{}.Mode() = %q, want standalone", got)
	}
	if got := (replytest.NoIO{ClientMode: rueidis.ClientModeCluster}).Mode(); got != rueidis.ClientModeCluster {
		t.Errorf("Mode() = %q, want cluster", got)
	}
	if (replytest.NoIO{ID: 1}) == (replytest.NoIO{ID: 2}) {
		t.Error("stubs with different IDs are equal")
	}
	defer func() {
		if recover() == nil {
			t.Error("Do on NoIO did not panic")
		}
	}()
	var c rueidis.Client = replytest.NoIO{}
	c.Do(t.Context(), rueidis.Completed{})
}

// Runs recognises a script's call in what Client recorded (EVAL until a server reported the digest).
func TestRuns(t *testing.T) {
	s, other := luakit.NewScript("s", "return 1"), luakit.NewScript("other", "return 2")
	c := &replytest.Client{Err: errors.New("refused")}
	_ = s.Exec(t.Context(), c, nil, []string{"a"})
	sent := c.Sent()
	if len(sent) != 1 || !replytest.Runs(sent[0], s) || replytest.Runs(sent[0], other) {
		t.Fatalf("Sent = %q: want one call recognised as s's only", sent)
	}
	for _, cmd := range [][]string{nil, {"EVAL"}, {"GET", "return 1"}, {"EVALSHA", ""}} {
		if replytest.Runs(cmd, s) {
			t.Errorf("Runs(%q) = true", cmd)
		}
	}
}
