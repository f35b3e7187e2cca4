package replytest_test

import (
	"errors"
	"testing"

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
