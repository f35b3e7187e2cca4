package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCluster(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		c := StartCluster(t, target)
		ctx := context.Background()
		require.Len(t, c.Nodes, 3)
		require.Len(t, c.Addrs, 3)
		assert.NotEmpty(t, c.Flavor)
		assert.NotEmpty(t, c.Version)
		t.Logf("%s: %s", target, c)

		for _, n := range c.Nodes {
			msg, err := n.Do(ctx, "CLUSTER", "INFO")
			require.NoError(t, err)
			info, err := msg.ToString()
			require.NoError(t, err)
			assert.Contains(t, info, "cluster_state:ok", n.Addr)
		}

		cc := c.Client(t)
		// One key in each primary's slots: the cluster client routes it, the owner holds it.
		for i, n := range c.Nodes {
			key := keyOwnedBy(t, c, i)
			val := fmt.Sprintf("value-%d", i)
			require.NoError(t, cc.Do(ctx, cc.B().Set().Key(key).Value(val).Build()).Error())
			got, err := cc.Do(ctx, cc.B().Get().Key(key).Build()).ToString()
			require.NoError(t, err)
			assert.Equal(t, val, got)

			msg, err := n.Do(ctx, "GET", key) // a single-node client: MOVED unless n owns key
			require.NoError(t, err, "node %d (%s)", i, n.Addr)
			direct, err := msg.ToString()
			require.NoError(t, err)
			assert.Equal(t, val, direct)
		}
	})
}

// keyOwnedBy returns a key whose slot the i-th node serves (by CLUSTER SLOTS), found with
// CLUSTER KEYSLOT.
func keyOwnedBy(t *testing.T, c *Cluster, i int) string {
	t.Helper()
	ctx := context.Background()
	msg, err := c.Nodes[i].Do(ctx, "CLUSTER", "SLOTS")
	require.NoError(t, err)
	ranges, err := msg.ToArray()
	require.NoError(t, err)
	host, port := c.Addrs[i][:strings.LastIndexByte(c.Addrs[i], ':')], c.Addrs[i][strings.LastIndexByte(c.Addrs[i], ':')+1:]
	owned := func(slot int64) bool {
		for _, r := range ranges {
			e, _ := r.ToArray()
			lo, _ := e[0].AsInt64()
			hi, _ := e[1].AsInt64()
			master, _ := e[2].ToArray()
			h, _ := master[0].ToString()
			p, _ := master[1].AsInt64()
			if slot >= lo && slot <= hi && h == host && fmt.Sprint(p) == port { // container nodes share a port
				return true
			}
		}
		return false
	}
	for j := range 10000 {
		key := fmt.Sprintf("testkit-key-%d", j)
		msg, err := c.Nodes[i].Do(ctx, "CLUSTER", "KEYSLOT", key)
		require.NoError(t, err)
		slot, err := msg.AsInt64()
		require.NoError(t, err)
		if owned(slot) {
			return key
		}
	}
	t.Fatalf("no key found for node %d", i)
	return ""
}
