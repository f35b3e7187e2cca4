// Package contenders holds the implementations that the lock and rate-limit benchmarks (go test
// -bench in ../../lock) and the side-by-side peer runner (../../cmd/peers) run against one server:
// Coordkit, its peers (rueidislock, bsm/redislock, go-redsync/redsync, go-redis/redis_rate) and the
// raw-script ceilings. Each contender builds its own clients from a [Server], so two contenders never
// share a connection.
package contenders

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/testkit"
)

// TTL is the lease TTL of every lock operation: far longer than one operation or one hand-off, so
// leases never expire mid-operation and a waiter is woken only by the holder's release.
const TTL = 10 * time.Second

// Server is what a contender needs to reach the benchmark server.
type Server struct {
	// Option is the base rueidis option (address, credentials, TLS, DB); each contender copies it.
	Option rueidis.ClientOption
}

// FromTestkit returns the Server of s.
func FromTestkit(s *testkit.Server) Server { return Server{Option: s.ClientOption()} }

// rueidisOption returns a copy of the base option with client-side caching off.
func (s Server) rueidisOption() rueidis.ClientOption {
	o := s.Option
	o.DisableCache = true
	return o
}

// GoRedis returns go-redis options for the same server (address, credentials, DB), default pool.
func (s Server) GoRedis() *redis.Options {
	o := s.Option
	addr := ""
	if len(o.InitAddress) > 0 {
		addr = o.InitAddress[0]
	}
	return &redis.Options{Addr: addr, Username: o.Username, Password: o.Password, DB: o.SelectDB, TLSConfig: o.TLSConfig}
}

// newClient returns a cache-free rueidis client of s.
func (s Server) newClient() (rueidis.Client, error) { return rueidis.NewClient(s.rueidisOption()) }

// Spec is a row of a contender table: a contender of type T (Lock, Handoff or Decider) and how to
// build it.
type Spec[T any] struct {
	// Name is the row name (the sub-benchmark name of the lock benchmarks).
	Name string
	// Ceiling marks the raw-script row: the server ceiling (for the hand-off, the floor) the others
	// are read against.
	Ceiling bool
	// New builds the contender over its own clients of s.
	New func(s Server) (T, error)
}

// Names returns the names of specs, in table order.
func Names[T any](specs []Spec[T]) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// Build builds every contender of specs over s, by name, and returns them with a function that
// closes them all; on an error it closes those built and returns it.
func Build[T interface{ Close() }](specs []Spec[T], s Server) (map[string]T, func(), error) {
	built := map[string]T{}
	closeAll := func() {
		for _, c := range built {
			c.Close()
		}
	}
	for _, spec := range specs {
		c, err := spec.New(s)
		if err != nil {
			closeAll()
			return nil, func() {}, fmt.Errorf("%s: %w", spec.Name, err)
		}
		built[spec.Name] = c
	}
	return built, closeAll, nil
}

// closers closes what a contender built, in reverse order.
type closers []func()

func (cs closers) Close() {
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// seq hands out cheap unique owner tokens (the raw ceilings' owners are deliberately not random).
var seq atomic.Int64

func nextOwner() string { return strconv.FormatInt(seq.Add(1), 10) }
