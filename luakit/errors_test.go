package luakit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ClassNone},
		{"LOADING", redisErr(t, "LOADING Redis is loading the dataset in memory"), ClassTransient},
		{"BUSY", redisErr(t, "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), ClassTransient},
		{"CLUSTERDOWN", redisErr(t, "CLUSTERDOWN The cluster is down"), ClassTransient},
		{"TRYAGAIN", redisErr(t, "TRYAGAIN Multiple keys request during rehashing of slot"), ClassTransient},
		{"MASTERDOWN", redisErr(t, "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), ClassTransient},
		{"READONLY", redisErr(t, "READONLY You can't write against a read only replica."), ClassTransient},
		{"NOREPLICAS", redisErr(t, "NOREPLICAS Not enough good replicas to write."), ClassTransient},
		{"OOM", redisErr(t, "OOM command not allowed when used memory > 'maxmemory'."), ClassTransient},
		{"MOVED", redisErr(t, "MOVED 3999 127.0.0.1:6381"), ClassTransient},
		{"wrapped LOADING", fmt.Errorf("lock: acquire: %w", redisErr(t, "LOADING x")), ClassTransient},
		{"NOPERM", redisErr(t, "NOPERM User alice has no permissions to run the 'eval' command"), ClassTerminal},
		{"WRONGTYPE", redisErr(t, "WRONGTYPE Operation against a key holding the wrong kind of value"), ClassTerminal},
		{"NOAUTH", redisErr(t, "NOAUTH Authentication required."), ClassTerminal},
		{"WRONGPASS", redisErr(t, "WRONGPASS invalid username-password pair or user is disabled."), ClassTerminal},
		{"ERR", redisErr(t, "ERR increment or decrement would overflow"), ClassTerminal},
		{"script error", redisErr(t, "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: abc, on @user_script:1."), ClassTerminal},
		{"LOADINGX is not LOADING", redisErr(t, "LOADINGX foo"), ClassTerminal},
		{"bare code", redisErr(t, "READONLY"), ClassTransient},
		{"unsupported", &UnsupportedError{Feature: "f", Command: "C"}, ClassTerminal},
		{"cross slot", &CrossSlotError{}, ClassTerminal},
		{"empty key", ValidateKey("k", ""), ClassTerminal},
		{"malformed", ErrMalformedInt, ClassTerminal},
		{"no slot", rueidis.ErrNoSlot, ClassTransient},
		{"canceled", context.Canceled, ClassUncertain},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ClassUncertain},
		{"os deadline", os.ErrDeadlineExceeded, ClassUncertain},
		{"eof", io.EOF, ClassUncertain},
		{"unexpected eof", io.ErrUnexpectedEOF, ClassUncertain},
		{"closing", rueidis.ErrClosing, ClassUncertain},
		{"docache aborted", rueidis.ErrDoCacheAborted, ClassUncertain},
		{"net op", opErr, ClassUncertain},
		{"refused dial", fmt.Errorf("x: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), ClassTransient},
		{"dial ended by ctx", &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, ClassTransient},
		{"reset after dial", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, ClassUncertain},
		{"net closed", net.ErrClosed, ClassUncertain},
		{"redis nil", rueidis.Nil, ClassUnknown},
		{"other", errors.New("boom"), ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			assert.Equal(t, tt.want, got, "%v", tt.err)
			assert.Equal(t, got == ClassTransient, IsTransient(tt.err))
			assert.Equal(t, got == ClassTerminal, IsTerminal(tt.err))
			assert.Equal(t, got == ClassUncertain, IsUncertain(tt.err))
			assert.Equal(t, got == ClassUncertain || got == ClassUnknown, MayHaveApplied(tt.err))
		})
	}
}

// MayHaveApplied, for the cases a cleanup decision meets: an error reply of any class proves the
// script stopped (nothing owed), a call never sent owes nothing, no reply or an unknown error owes a
// cleanup.
func TestMayHaveApplied(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"NOPERM reply", fmt.Errorf("lock: acquire: %w", redisErr(t, "NOPERM User u has no permissions to run the 'del' command")), false},
		{"transient reply", redisErr(t, "LOADING x"), false},
		{"script error", redisErr(t, "ERR user_script:1: boom"), false},
		{"refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{"closed", ErrClosed, false},
		{"no reply", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), true},
		{"ctx ended", context.DeadlineExceeded, true},
		{"unknown", errors.New("boom"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, MayHaveApplied(tt.err), "%v", tt.err)
		})
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "none", ClassNone.String())
	assert.Equal(t, "transient", ClassTransient.String())
	assert.Equal(t, "terminal", ClassTerminal.String())
	assert.Equal(t, "uncertain", ClassUncertain.String())
	assert.Equal(t, "unknown", ClassUnknown.String())
	assert.Equal(t, "Class(42)", Class(42).String())
}

func TestUnsupportedError(t *testing.T) {
	t.Parallel()
	f := HashFieldTTL
	var err error = &UnsupportedError{Feature: f.Name, Command: f.Command, Minimum: f.Minimum}
	assert.Equal(t, "luakit: server lacks hash-field expiry (HPEXPIRE); requires Redis 7.4 or Valkey 9.0", err.Error())
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorIs(t, fmt.Errorf("lease: %w", err), ErrUnsupported)
	assert.Equal(t, "luakit: server lacks x (X)", (&UnsupportedError{Feature: "x", Command: "X"}).Error())
}
