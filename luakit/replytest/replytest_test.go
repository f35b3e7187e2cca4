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
