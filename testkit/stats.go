package testkit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// CommandStats runs INFO commandstats on c and returns the calls of each command, keyed by the
// lower-case command name without the "cmdstat_" prefix ("evalsha", "get", "client|id"). Commands
// never called are absent (a zero value). Compare two snapshots to count the commands a piece of
// code sent; the INFO call itself counts as "info". On a cluster client INFO goes to one node:
// use a node's client (Cluster.Nodes[i].Client or Server.CommandStats) instead.
func CommandStats(ctx context.Context, c rueidis.Client) (map[string]int64, error) {
	txt, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return nil, fmt.Errorf("testkit: INFO commandstats: %w", err)
	}
	return parseCommandStats(txt)
}

func parseCommandStats(txt string) (map[string]int64, error) {
	out := map[string]int64{}
	for k, v := range parseInfo(txt) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				calls, err := strconv.ParseInt(n, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("testkit: INFO commandstats: %s: %w", k, err)
				}
				out[strings.ToLower(name)] = calls
			}
		}
	}
	return out, nil
}
