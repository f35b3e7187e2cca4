package replicaack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/testkit"
)

// TestWaitInsideScriptOrMulti records why the acknowledgement follows the script instead of running
// inside it: WAIT never waits there. Asked for one replica of a server that has none, with a 60s
// timeout, inside a script Redis 7.0 refuses it and the other servers answer 0 at once; inside MULTI
// every server answers 0 at once. Outside both, the same WAIT blocks until its timeout (here cut short
// by a 300ms context). WAITAOF is unknown to Redis 7.0 and, with numlocal 1, refused where appendonly
// is off.
func TestWaitInsideScriptOrMulti(t *testing.T) {
	standalone := matrix.Select(matrix.Targets(), func(mt matrix.Target) bool { return !mt.Cluster && !mt.Sentinel })
	matrix.Run(t, standalone, func(t *testing.T, mt matrix.Target) {
		e := matrix.StartEnv(t, mt)
		c := e.Raw
		old := mt.Server == testkit.Redis70

		got, err := c.Do(ctx(t), c.B().Eval().Script("return redis.call('WAIT', 1, 60000)").Numkeys(0).Build()).AsInt64()
		if old {
			require.Error(t, err)
			assert.Contains(t, err.Error(), "not allowed from script")
		} else {
			require.NoError(t, err)
			assert.Zero(t, got, "WAIT inside a script answers at once")
		}

		res := c.DoMulti(ctx(t), c.B().Multi().Build(), c.B().Set().Key("wait:multi").Value("1").Build(),
			c.B().Wait().Numreplicas(1).Timeout(60000).Build(), c.B().Exec().Build())
		arr, err := res[3].ToArray()
		require.NoError(t, err)
		require.Len(t, arr, 2)
		n, err := arr[1].AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "WAIT inside MULTI answers at once")

		short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
		defer cancel()
		err = c.Do(short, c.B().Wait().Numreplicas(1).Timeout(60000).Build()).Error()
		require.ErrorIs(t, err, context.DeadlineExceeded, "WAIT alone blocks")

		err = c.Do(ctx(t), c.B().Waitaof().Numlocal(1).Numreplicas(0).Timeout(100).Build()).Error()
		require.Error(t, err)
		if old {
			assert.Contains(t, strings.ToLower(err.Error()), "unknown command")
		} else {
			assert.Contains(t, err.Error(), "appendonly")
		}
	})
}
