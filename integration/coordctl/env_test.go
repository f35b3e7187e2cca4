package coordctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/coordctl"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
)

// env is one running target shared by the scenarios of that target; scenarios run one after another,
// each on its own keys.
type env struct {
	*matrix.Env
	url string
	hfe bool // the server has hash-field expiry (module lease)
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	e := &env{Env: matrix.StartEnv(t, st)}
	opt := e.ClientOption()
	u := url.URL{Scheme: "redis", Host: opt.InitAddress[0]}
	if opt.Username != "" || opt.Password != "" {
		u.User = url.UserPassword(opt.Username, opt.Password)
	}
	e.url = u.String()
	hfe, err := luakit.Probe(ctx(t), e.Raw, luakit.HashFieldTTL)
	require.NoError(t, err)
	e.hfe = hfe
	return e
}

func ctx(t testing.TB) context.Context { return matrix.Ctx(t) }

// result is one coordctl run.
type result struct {
	out, err string
	code     int
}

// run runs coordctl with the target's --url (and --cluster on a Cluster) before args.
func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	full := []string{"--url", e.url}
	if e.IsCluster() {
		full = append(full, "--cluster")
	}
	return runArgs(t, append(full, args...)...)
}

func runArgs(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := coordctl.Run(ctx(t), args, &out, &errb)
	return result{out: out.String(), err: errb.String(), code: code}
}

// runJSON runs coordctl --json and decodes its one object; it fails the test on a non-zero exit.
func (e *env) runJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	r := e.run(t, append([]string{"--json"}, args...)...)
	require.Equal(t, coordctl.ExitOK, r.code, "stderr: %s", r.err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.out), &m), "output: %s", r.out)
	return m
}

// snapshot is the server-side state of some keys: DUMP and PEXPIRETIME of each (absolute expiry, so
// equal snapshots mean nothing was written and no TTL changed).
type snapshot map[string][2]string

func (e *env) snapshot(t *testing.T, keys ...string) snapshot {
	t.Helper()
	s := snapshot{}
	for _, k := range keys {
		d, err := e.Raw.Do(ctx(t), e.Raw.B().Dump().Key(k).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			d, err = "<absent>", nil
		}
		require.NoError(t, err)
		x, err := e.Raw.Do(ctx(t), e.Raw.B().Pexpiretime().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		s[k] = [2]string{d, time.UnixMilli(x).String()}
	}
	return s
}

// readCommands are the commands an inspection (or coordctl's capability probes and script loads) may
// run besides the target's background commands (matrix.Env.BackgroundCommands: INFO, PING,
// handshakes, topology reads); any other command in INFO commandstats fails the read-only check.
var readCommands = map[string]bool{
	"evalsha": true, "eval": true, "evalsha_ro": true, "eval_ro": true, "smembers": true, "hgetall": true, "type": true, "get": true, "pttl": true, "time": true, "hmget": true,
	"llen": true, "lrange": true, "hexists": true, "hstrlen": true, "hkeys": true, "hpttl": true, "zscore": true, "zrangebyscore": true,
	"command|info": true, "command|docs": true, "command": true, "dump": true, "pexpiretime": true, "script|load": true,
}
