package luakit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestReplicaAckValidate: the zero value is off and valid; a value that asks for something needs a
// whole-millisecond timeout of at least 1ms and no negative count.
func TestReplicaAckValidate(t *testing.T) {
	tests := []struct {
		name string
		ack  ReplicaAck
		ok   bool
		cmd  string
	}{
		{name: "zero", ack: ReplicaAck{}, ok: true},
		{name: "one replica", ack: ReplicaAck{Replicas: 1, Timeout: 100 * time.Millisecond}, ok: true, cmd: "WAIT 1 100"},
		{name: "aof only", ack: ReplicaAck{AOF: true, Timeout: time.Second}, ok: true, cmd: "WAITAOF 1 0 1000"},
		{name: "aof and replicas", ack: ReplicaAck{Replicas: 2, AOF: true, Timeout: time.Millisecond}, ok: true, cmd: "WAITAOF 1 2 1"},
		{name: "negative", ack: ReplicaAck{Replicas: -1, Timeout: time.Second}},
		{name: "nothing to wait for", ack: ReplicaAck{Timeout: time.Second}},
		{name: "no timeout", ack: ReplicaAck{Replicas: 1}},
		{name: "sub-millisecond", ack: ReplicaAck{Replicas: 1, Timeout: 1500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ack.Validate("lock")
			if (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "lock: ")) {
				t.Fatalf("Validate = %v: not a lock ConfigError", err)
			}
			if tt.ok && tt.ack.String() != tt.cmd {
				t.Fatalf("String = %q, want %q", tt.ack.String(), tt.cmd)
			}
		})
	}
}

// TestReplicaAckCheck: the WAIT and WAITAOF replies against what was asked.
func TestReplicaAckCheck(t *testing.T) {
	res := func(m rueidis.RedisMessage) rueidis.RedisResult { return rueidis.NewResult(m, nil) }
	wait := ReplicaAck{Replicas: 2, Timeout: 10 * time.Millisecond}
	aof := ReplicaAck{Replicas: 1, AOF: true, Timeout: 10 * time.Millisecond}
	tests := []struct {
		name     string
		ack      ReplicaAck
		resp     rueidis.RedisResult
		ok       bool
		replicas int64
	}{
		{name: "wait enough", ack: wait, resp: res(msg(t, ':', "", 2)), ok: true},
		{name: "wait more", ack: wait, resp: res(msg(t, ':', "", 3)), ok: true},
		{name: "wait short", ack: wait, resp: res(msg(t, ':', "", 1)), replicas: 1},
		{name: "waitaof enough", ack: aof, resp: res(arrayMsg(t, 1, 1)), ok: true},
		{name: "waitaof no local fsync", ack: aof, resp: res(arrayMsg(t, 0, 1)), replicas: 1},
		{name: "waitaof short", ack: aof, resp: res(arrayMsg(t, 1, 0))},
		{name: "waitaof malformed", ack: aof, resp: res(msg(t, ':', "", 1))},
		{name: "refused", ack: aof, resp: res(msg(t, '-', "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.", 0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ack.check(tt.resp)
			if (err == nil) != tt.ok {
				t.Fatalf("check = %v, want ok %v", err, tt.ok)
			}
			if tt.ok {
				return
			}
			var ae *AckError
			if !errors.Is(err, ErrNotAcknowledged) || !errors.As(err, &ae) || ae.Replicas != tt.replicas {
				t.Fatalf("check = %v, want an AckError with %d replicas", err, tt.replicas)
			}
			if Classify(err) != ClassUncertain {
				t.Fatalf("Classify(%v) = %v, want uncertain", err, Classify(err))
			}
		})
	}
}
