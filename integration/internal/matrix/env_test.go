package matrix

import (
	"maps"
	"testing"

	"github.com/coordkit/coordkit/testkit"
)

// TestCommandsBetween: the target's background commands are left out of a delta, per kind of target,
// and every other command is kept, with a count that went down kept as negative.
func TestCommandsBetween(t *testing.T) {
	before := map[string]int64{
		"info": 10, "ping": 3, "publish": 7, "replconf": 100, "cluster|slots": 2,
		"evalsha": 5, "get": 4, "del": 9,
	}
	after := map[string]int64{
		"info": 12, "ping": 5, "publish": 8, "replconf": 101, "subscribe": 1, "role": 1, "cluster|slots": 3,
		"hello": 1, "client|setinfo": 2, "client|tracking": 1,
		"evalsha": 6, "get": 4, "set": 1, "client|caching": 1, "multi": 1, "exec": 1,
	}
	// Kept on every target: data commands, CLIENT CACHING, MULTI / EXEC, and DEL gone down (a restart).
	kept := map[string]int64{"evalsha": 1, "set": 1, "client|caching": 1, "multi": 1, "exec": 1, "del": -9}
	// Elsewhere what a Sentinel group sends is a client's and counted.
	others := maps.Clone(kept)
	maps.Copy(others, map[string]int64{"publish": 1, "replconf": 1, "subscribe": 1, "role": 1})
	tests := []struct {
		name string
		env  *Env
		want map[string]int64
	}{
		{"sentinel", &Env{Sentinel: &testkit.Sentinel{}}, kept},
		{"cluster", &Env{Cluster: &testkit.Cluster{}}, others},
		{"standalone", &Env{}, others},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.env.CommandsBetween(before, after); !maps.Equal(got, tt.want) {
				t.Fatalf("CommandsBetween = %v, want %v", got, tt.want)
			}
		})
	}
	if d := (&Env{}).CommandsBetween(after, after); len(d) != 0 {
		t.Fatalf("CommandsBetween of one reading = %v, want nothing", d)
	}
}

func TestBlockedIn(t *testing.T) {
	const list = "id=3 addr=127.0.0.1:1 flags=N db=0 cmd=client|list\n" +
		"id=4 addr=127.0.0.1:2 flags=b db=0 cmd=blpop\n" +
		"id=5 addr=127.0.0.1:3 flags=N db=0 cmd=xreadgroup\n"
	cases := []struct {
		cmd  string
		want bool
	}{
		{"blpop", true},
		{"xreadgroup", false}, // not blocked
		{"brpop", false},
		{"blp", false},
	}
	for _, tc := range cases {
		if got := blockedIn(list, tc.cmd); got != tc.want {
			t.Errorf("blockedIn(%q) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}
