package redlock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

// TestInspectQuorumView: the quorum's view is the owner held on at least a quorum of nodes, lasting
// as long as the quorum-th longest of its nodes' lives; split owners or too few nodes are not held.
func TestInspectQuorumView(t *testing.T) {
	held := func(owner string, ms int64) NodeInspection {
		return NodeInspection{Exists: true, owner: owner, Remaining: time.Duration(ms) * time.Millisecond}
	}
	forever := NodeInspection{Exists: true, owner: "a", NoExpiry: true}
	down := NodeInspection{Err: errors.New("down")}
	for _, tc := range []struct {
		name     string
		rows     []NodeInspection
		exists   bool
		rem      time.Duration
		noExpiry bool
	}{
		{"one owner on 3 of 5", []NodeInspection{held("a", 5000), held("a", 3000), held("a", 4000), held("b", 9000), {}}, true, 3 * time.Second, false},
		{"one owner on all", []NodeInspection{held("a", 1000), held("a", 3000), held("a", 2000)}, true, 2 * time.Second, false},
		{"split owners", []NodeInspection{held("a", 5000), held("a", 3000), held("b", 4000), held("b", 9000), {}}, false, 0, false},
		{"too few nodes", []NodeInspection{held("a", 5000), {}, down}, false, 0, false},
		{"no expiry counts longest", []NodeInspection{forever, forever, held("a", 1000)}, true, 0, true},
		{"one without expiry", []NodeInspection{forever, held("a", 2000), held("a", 1000)}, true, 2 * time.Second, false},
		{"absent", []NodeInspection{{}, {}, {}}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inspection{Nodes: tc.rows}
			in.quorumView(len(tc.rows)/2 + 1)
			if in.Exists != tc.exists || in.Remaining != tc.rem || in.NoExpiry != tc.noExpiry {
				t.Fatalf("Exists %v Remaining %v NoExpiry %v; want %v %v %v", in.Exists, in.Remaining, in.NoExpiry, tc.exists, tc.rem, tc.noExpiry)
			}
		})
	}
}

// TestDecodeInspect: inspect.lua's reply shapes, and foreign data as ErrForeignData.
func TestDecodeInspect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []any
		want  NodeInspection
		err   error
	}{
		{"absent", []any{-1, -2, "", ""}, NodeInspection{}, nil},
		{"held, fenced", []any{1, 1500, "d1", "9007199254740993"}, NodeInspection{Exists: true, Remaining: 1500 * time.Millisecond, FencingToken: 9007199254740993, owner: "d1"}, nil},
		{"held without expiry", []any{1, -1, "d1", ""}, NodeInspection{Exists: true, NoExpiry: true, owner: "d1"}, nil},
		{"free, fence kept", []any{-1, -2, "", "7"}, NodeInspection{FencingToken: 7}, nil},
		{"wrong type", []any{-3, -2, "", ""}, NodeInspection{}, ErrForeignData},
		{"malformed fence", []any{-1, -2, "", "x"}, NodeInspection{}, ErrForeignData},
		{"negative fence", []any{-1, -2, "", "-3"}, NodeInspection{}, ErrForeignData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeInspect(replytest.Msg(t, tc.reply), nil)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := decodeInspect(replytest.Msg(t, []any{1, 5}), nil); err == nil {
		t.Fatal("short reply accepted")
	}
}

// TestInspectErrors: an empty name fails before any I/O; with fewer than a quorum answering, Inspect
// returns a *QuorumError of Op "inspect" listing every node.
func TestInspectErrors(t *testing.T) {
	boom := errors.New("fake: connection reset")
	g, nodes := fakeGroup(t, 3, func(int, context.Context) error { return boom })
	if _, err := g.Inspect(context.Background(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Inspect(\"\") = %v, want ErrInvalidConfig", err)
	}
	for _, n := range nodes {
		if n.calls.Load() != 0 {
			t.Fatal("I/O for an invalid name")
		}
	}
	key := "job"
	for i := 0; luakit.Slot(key) != 0; i++ { // the fake's zero Builder takes keys of slot 0 only
		key = "job" + strconv.Itoa(i)
	}
	_, err := g.Inspect(context.Background(), key)
	var qe *QuorumError
	if !errors.As(err, &qe) || qe.Op != "inspect" || qe.Got != 0 || len(qe.Nodes) != 3 || !errors.Is(err, boom) {
		t.Fatalf("Inspect = %v, want an inspect QuorumError of 3 nodes", err)
	}
	for _, n := range nodes {
		if n.calls.Load() != 1 {
			t.Fatalf("node %d got %d calls, want one round trip each", n.id, n.calls.Load())
		}
	}
}
