package luakit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// ReplicaAck asks that a write be acknowledged before it counts: after the write, on the same
// connection, the client sends WAIT Replicas Timeout (the write reached that many replicas), or with
// AOF, WAITAOF 1 Replicas Timeout (the write was fsynced to the primary's append-only file and to
// that many replicas'). Primitives take it through their WithReplicaAck option and apply it to every
// acquisition and renewal (see the primitive's documentation, "Replica acknowledgement").
//
// What it guarantees and what it does not: docs/replica-ack.md. In short, replication stays
// asynchronous: an acknowledged write survives a failover that promotes a replica which acknowledged
// it, and Sentinel and Cluster promote the most up-to-date replica in normal operation, but a
// replica that did not acknowledge can still be promoted (a manual failover to it, replica-priority).
//
// The zero value asks for nothing (every write counts once the primary answered). Use
// [ReplicaAck.Validate] to check a value; the options do.
type ReplicaAck struct {
	// Replicas is how many replicas must acknowledge the write (WAIT's numreplicas, or WAITAOF's
	// numreplicas with AOF); 0 with AOF: only the primary's own fsync.
	Replicas int
	// AOF waits for the append-only file instead (WAITAOF, Redis 7.2+ and Valkey 7.2+): the primary's
	// own fsync (it needs appendonly yes on the primary) and Replicas replicas' fsyncs. Default: WAIT.
	AOF bool
	// Timeout bounds the wait on the server, in whole milliseconds, at least 1ms (a zero timeout would
	// make WAIT block for ever). While the server waits, the commands that the same client sent after
	// the write on the same connection wait too.
	Timeout time.Duration
}

// Enabled reports whether a asks for any acknowledgement.
func (a ReplicaAck) Enabled() bool { return a.Replicas > 0 || a.AOF }

// Validate returns nil for the zero value and for a valid acknowledgement; otherwise an error matching
// [ErrInvalidConfig] naming module.
func (a ReplicaAck) Validate(module string) error {
	switch {
	case !a.Enabled() && a.Replicas == 0 && a.Timeout == 0:
		return nil
	case a.Replicas < 0:
		return InvalidConfig(module, "replica acknowledgement: negative replica count %d", a.Replicas)
	case !a.Enabled():
		return InvalidConfig(module, "replica acknowledgement: no replica and no AOF to wait for")
	case a.Timeout < time.Millisecond || a.Timeout%time.Millisecond != 0:
		return InvalidConfig(module, "replica acknowledgement: timeout %v is not a whole number of milliseconds of at least 1ms", a.Timeout)
	}
	return nil
}

// String describes a, e.g. "WAIT 1 100" or "WAITAOF 1 1 100"; "" for the zero value.
func (a ReplicaAck) String() string {
	if !a.Enabled() {
		return ""
	}
	if a.AOF {
		return fmt.Sprintf("WAITAOF 1 %d %d", a.Replicas, a.Timeout.Milliseconds())
	}
	return fmt.Sprintf("WAIT %d %d", a.Replicas, a.Timeout.Milliseconds())
}

// command builds the WAIT or WAITAOF of a, routed on a Cluster client to key's slot (the node and the
// connection that ran the write on key). It carries no blocking flag, so rueidis sends it on the
// pipelined connection of the write instead of a connection of its own: WAIT counts the replicas that
// acknowledged the last write of the connection it arrives on.
func (a ReplicaAck) command(c rueidis.Client, key string) rueidis.Completed {
	ms := strconv.FormatInt(a.Timeout.Milliseconds(), 10)
	var cmd rueidis.Completed
	if a.AOF {
		cmd = c.B().Arbitrary("WAITAOF").Args("1", strconv.Itoa(a.Replicas), ms).Build()
	} else {
		cmd = c.B().Arbitrary("WAIT").Args(strconv.Itoa(a.Replicas), ms).Build()
	}
	if c.Mode() == rueidis.ClientModeCluster {
		cmd = cmd.SetSlot(key)
	}
	return cmd
}

// check reads the reply of a's command: nil when enough acknowledged, else a [*AckError] (or the
// error the server answered, such as an unknown WAITAOF or WAITAOF with appendonly no, wrapped so that
// it also matches [ErrNotAcknowledged]).
func (a ReplicaAck) check(resp rueidis.RedisResult) error {
	if err := resp.Error(); err != nil {
		return &AckError{Ack: a, Err: err}
	}
	e := &AckError{Ack: a}
	if a.AOF {
		arr, err := resp.AsIntSlice()
		if err != nil || len(arr) != 2 {
			return &AckError{Ack: a, Err: fmt.Errorf("malformed WAITAOF reply: %v", err)}
		}
		e.Local, e.Replicas = arr[0], arr[1]
		if e.Local >= 1 && e.Replicas >= int64(a.Replicas) {
			return nil
		}
		return e
	}
	n, err := resp.AsInt64()
	if err != nil {
		return &AckError{Ack: a, Err: fmt.Errorf("malformed WAIT reply: %w", err)}
	}
	e.Replicas = n
	if n >= int64(a.Replicas) {
		return nil
	}
	return e
}

// ErrNotAcknowledged is matched (via errors.Is) by every [*AckError]: a write the primary applied was
// not acknowledged as a [ReplicaAck] asked, so it may not survive a failover.
var ErrNotAcknowledged = errors.New("write not acknowledged by enough replicas")

// AckError reports a write that the primary applied but that was not acknowledged as asked: fewer
// replicas (or fsyncs) acknowledged it within the timeout, or the server refused the WAIT or WAITAOF
// itself (Err). errors.Is(err, ErrNotAcknowledged) reports true. [Classify] sorts it as
// [ClassUncertain]: whether the write survives a failover is not known.
type AckError struct {
	// Ack is what was asked.
	Ack ReplicaAck
	// Replicas is how many replicas acknowledged (WAIT's reply, or WAITAOF's second count).
	Replicas int64
	// Local is WAITAOF's first count: 1 when the primary fsynced the write (0 with WAIT).
	Local int64
	// Err is the server's error reply to the WAIT or WAITAOF, or a malformed reply; nil when the
	// server answered with too few acknowledgements.
	Err error
}

func (e *AckError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s failed: %v", ErrNotAcknowledged, e.Ack, e.Err)
	}
	if e.Ack.AOF {
		return fmt.Sprintf("%s: %d of %d replicas and %d of 1 local fsyncs acknowledged within %v (%s)",
			ErrNotAcknowledged, e.Replicas, e.Ack.Replicas, e.Local, e.Ack.Timeout, e.Ack)
	}
	return fmt.Sprintf("%s: %d of %d replicas acknowledged within %v (%s)", ErrNotAcknowledged, e.Replicas, e.Ack.Replicas, e.Ack.Timeout, e.Ack)
}

// Is reports whether target is ErrNotAcknowledged.
func (e *AckError) Is(target error) bool { return target == ErrNotAcknowledged }

// Unwrap returns Err.
func (e *AckError) Unwrap() error { return e.Err }

// ExecOrderedAck is [Script.ExecOrdered] followed, in the same round trip and on the same connection,
// by the WAIT or WAITAOF of ack: on a standalone or Sentinel client on the connection ExecOrdered uses;
// on a Cluster client on a dedicated connection to the primary of keys[0]'s slot (see execAck). It
// returns the script's result as ExecOrdered does, and ackErr: nil when the script answered with an
// error reply (nothing to acknowledge) or when the write was acknowledged as asked; a [*AckError]
// otherwise, and also when the script's reply is missing (then the acknowledgement is unknown too). A
// script that answered without writing (an owner check that failed) may still get a non-nil ackErr:
// callers look at the script's answer first. With a zero ack it is ExecOrdered and ackErr is nil. It
// blocks until both replies arrive or ctx ends (the server waits up to ack.Timeout). Safe for
// concurrent use.
func (s *Script) ExecOrderedAck(ctx context.Context, c rueidis.Client, ack ReplicaAck, keys, args []string) (resp rueidis.RedisResult, ackErr error) {
	if !ack.Enabled() {
		return s.ExecOrdered(ctx, c, keys, args), nil
	}
	resp, _, ackErr = s.execAck(ctx, c, ack, false, keys, args)
	return resp, ackErr
}

// ExecOrderedTrackedAck is [Script.ExecOrderedTracked] with the acknowledgement of
// [Script.ExecOrderedAck]: CLIENT CACHING YES, the script and the WAIT (or WAITAOF) in one round trip.
// tracked is as for ExecOrderedTracked (false on a Cluster client, or when the server refused CLIENT
// CACHING YES).
func (s *Script) ExecOrderedTrackedAck(ctx context.Context, c rueidis.Client, ack ReplicaAck, keys, args []string) (resp rueidis.RedisResult, tracked bool, ackErr error) {
	if !ack.Enabled() {
		resp, tracked = s.ExecOrderedTracked(ctx, c, keys, args)
		return resp, tracked, nil
	}
	return s.execAck(ctx, c, ack, c.Mode() != rueidis.ClientModeCluster, keys, args)
}

// execAck sends [CLIENT CACHING YES,] the script and the acknowledgement pipelined with DoMulti, so
// that the WAIT arrives on the connection that ran the script: on a standalone or Sentinel client on
// the connection ExecOrdered uses (the script keeps NoSlot). On a Cluster client it borrows a
// dedicated connection (rueidis Dedicated) to the slot's primary: there rueidis does not follow a
// MOVED or ASK redirection on its own, which it does for pipelined commands and which could send the
// script to the slot's new owner while the WAIT is answered by the old one. A redirected script
// comes back as its MOVED or ASK error reply (transient; nothing ran). NOSCRIPT and TRYAGAIN are
// handled as by ExecOrdered (the whole batch is sent again).
func (s *Script) execAck(ctx context.Context, c rueidis.Client, ack ReplicaAck, track bool, keys, args []string) (rueidis.RedisResult, bool, error) {
	cluster := c.Mode() == rueidis.ClientModeCluster
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	var do func(cmds ...rueidis.Completed) []rueidis.RedisResult
	if cluster {
		var out rueidis.RedisResult
		var tracked bool
		var ackErr error
		err := c.Dedicated(func(d rueidis.DedicatedClient) error {
			do = func(cmds ...rueidis.Completed) []rueidis.RedisResult { return d.DoMulti(ctx, cmds...) }
			out, tracked, ackErr = s.execAckOn(ctx, c, do, ack, false, true, key, keys, args)
			return nil
		})
		if err != nil {
			return rueidis.NewErrorResult(err), false, &AckError{Ack: ack, Err: err}
		}
		return out, tracked, ackErr
	}
	do = func(cmds ...rueidis.Completed) []rueidis.RedisResult { return c.DoMulti(ctx, cmds...) }
	return s.execAckOn(ctx, c, do, ack, track, false, key, keys, args)
}

// execAckOn is execAck's loop over one way of sending (do); slotted passes the script's keys with
// their slot (a Cluster's dedicated connection needs it).
func (s *Script) execAckOn(ctx context.Context, c rueidis.Client, do func(cmds ...rueidis.Completed) []rueidis.RedisResult,
	ack ReplicaAck, track, slotted bool, key string, keys, args []string) (rueidis.RedisResult, bool, error) {
	send := func(digest string) (resp, waited rueidis.RedisResult, tracked bool) {
		cmds := make(rueidis.Commands, 0, 3)
		if track {
			cmds = append(cmds, c.B().ClientCaching().Yes().Build().ToPipe())
		}
		cmds = append(cmds, s.command(c.B(), digest, false, slotted, keys, args), ack.command(c, key))
		res := do(cmds...)
		n := len(res)
		return res[n-2], res[n-1], track && res[0].Error() == nil
	}
	var r tryAgain
	for {
		digest := s.SHA1()
		resp, waited, tracked := send(digest)
		if s.settle(ctx, c, digest, resp.Error()) {
			resp, waited, tracked = send("")
		}
		if again, ended := r.wait(ctx, resp.Error()); !again {
			switch _, isReply := rueidis.IsRedisErr(resp.Error()); {
			case ended != nil:
				return rueidis.NewErrorResult(ended), false, nil
			case isReply:
				return permResult(resp), false, nil // the script refused before writing: nothing to acknowledge
			case resp.Error() != nil:
				return resp, false, &AckError{Ack: ack, Err: resp.Error()}
			}
			return resp, tracked, ack.check(waited)
		}
	}
}
