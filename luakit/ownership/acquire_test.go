package ownership

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

// fakeAcquirer answers one attempt as scripted and records what the core did with it.
type fakeAcquirer struct {
	sendErr   error // the reply's error (nil: an answered reply, decoded as reply/decodeErr)
	reply     Reply
	decodeErr error
	grantErr  error
	ackErr    error

	sent, granted bool
	releases      int
	releaseErr    error
}

func (a *fakeAcquirer) SendAcquire(context.Context) Sent {
	a.sent = true
	if a.sendErr != nil {
		return Sent{Start: time.Now(), Resp: rueidis.NewErrorResult(a.sendErr)}
	}
	return Sent{Start: time.Now(), Tracked: true, Ack: a.ackErr}
}

func (a *fakeAcquirer) DecodeAcquire(rueidis.RedisMessage) (Reply, error) {
	return a.reply, a.decodeErr
}

func (a *fakeAcquirer) GrantAcquire(context.Context, time.Time) error {
	a.granted = a.grantErr == nil
	return a.grantErr
}

func (a *fakeAcquirer) ReleaseAcquire(context.Context) (bool, error) {
	a.releases++
	return false, a.releaseErr
}

// TestTry holds the one acquisition rule to every case: what is sent, whether the owner-checked
// cleanup follows, and what a waiter is told (retry, busy, or the error that ends it).
func TestTry(t *testing.T) {
	refused := errors.New("refused by the script")
	noperm := replytest.Error(t, "NOPERM User app has no permissions to run the 'del' command")
	loading := replytest.Error(t, "LOADING Redis is loading the dataset in memory")
	notAcked := &luakit.AckError{Ack: luakit.ReplicaAck{Replicas: 1, Timeout: time.Millisecond}}
	tests := []struct {
		name      string
		a         fakeAcquirer
		cancelled bool
		cleanup   bool  // an owner-checked release is sent
		retry     bool  // a waiter tries again
		busy      bool  // a waiter sleeps
		is        error // Err matches it (nil: acquired)
		notIs     error // Err must not match it
	}{
		{name: "granted", a: fakeAcquirer{reply: Reply{Granted: true}}},
		{name: "busy", a: fakeAcquirer{reply: Reply{Busy: true, HolderTTL: time.Second}}, busy: true, is: luakit.ErrNotAcquired},
		{name: "refusal answered", a: fakeAcquirer{reply: Reply{Err: refused}}, is: refused},
		{name: "late grant", a: fakeAcquirer{reply: Reply{Granted: true}, grantErr: luakit.ErrLateReply}, retry: true, is: luakit.ErrLateReply},
		{name: "malformed reply", a: fakeAcquirer{decodeErr: errors.New("unexpected status 7")}, cleanup: true, is: luakit.ErrUncertain},
		{name: "no verdict", a: fakeAcquirer{}, cleanup: true, is: luakit.ErrUncertain},
		{name: "no reply, cleanup answered", a: fakeAcquirer{sendErr: io.ErrUnexpectedEOF}, cleanup: true, retry: true, is: luakit.ErrUncertain},
		{name: "no reply, cleanup unanswered", a: fakeAcquirer{sendErr: io.ErrUnexpectedEOF, releaseErr: io.ErrUnexpectedEOF}, cleanup: true, is: luakit.ErrUncertain},
		{name: "unknown error", a: fakeAcquirer{sendErr: errors.New("boom")}, cleanup: true},
		{name: "acl refusal", a: fakeAcquirer{sendErr: noperm}, is: noperm, notIs: luakit.ErrUncertain},
		{name: "transient reply", a: fakeAcquirer{sendErr: loading}, retry: true, notIs: luakit.ErrUncertain},
		{name: "granted, not acknowledged", a: fakeAcquirer{reply: Reply{Granted: true}, ackErr: notAcked}, cleanup: true, is: luakit.ErrNotAcknowledged},
		{name: "busy, not acknowledged", a: fakeAcquirer{reply: Reply{Busy: true, HolderTTL: time.Second}, ackErr: notAcked}, busy: true, is: luakit.ErrNotAcquired},
		{name: "ctx ended before the send", a: fakeAcquirer{reply: Reply{Granted: true}}, cancelled: true, is: context.Canceled, notIs: luakit.ErrUncertain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Name: "test", Logger: quiet, CleanupTimeout: 50 * time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelled {
				cancel()
			}
			a := tt.a
			got := cfg.Try(ctx, "acquire", &a)
			if a.sent == tt.cancelled {
				t.Fatalf("sent = %v with ctx cancelled = %v", a.sent, tt.cancelled)
			}
			if (a.releases > 0) != tt.cleanup || a.releases > 1 {
				t.Fatalf("%d cleanups, want cleanup %v", a.releases, tt.cleanup)
			}
			if got.Retry != tt.retry || got.Busy != tt.busy {
				t.Fatalf("Retry %v Busy %v, want %v %v (Err %v)", got.Retry, got.Busy, tt.retry, tt.busy, got.Err)
			}
			acquired := tt.a.reply.Granted && tt.a.grantErr == nil && !tt.cancelled && tt.a.sendErr == nil && tt.a.decodeErr == nil && tt.a.ackErr == nil
			if acquired != (got.Err == nil) || acquired != a.granted {
				t.Fatalf("Err %v, granted %v; want acquired %v", got.Err, a.granted, acquired)
			}
			if tt.is != nil && !errors.Is(got.Err, tt.is) {
				t.Fatalf("Err %v does not match %v", got.Err, tt.is)
			}
			if tt.notIs != nil && errors.Is(got.Err, tt.notIs) {
				t.Fatalf("Err %v matches %v", got.Err, tt.notIs)
			}
		})
	}
}
