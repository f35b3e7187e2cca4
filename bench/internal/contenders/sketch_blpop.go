package contenders

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
)

// SketchBlock is the name of the blocking-pop variant of the server-side hand-off sketch (see
// NewSketchBlockHandoff).
const SketchBlock = "sketch-blpop"

// sketchBRelease is the variant's release (its waiters queue with sketchWait, the entry
// "g|<owner>"): for the lease's owner, it grants the lease to the queue's head (SET PX, INCR) and
// pushes the fencing token onto the head's grant list "{key}:grant:<owner>" (derived from the
// queue key, so not declared in KEYS: standalone only), which expires with the lease, or deletes
// the lease when nobody waits.
var sketchBRelease = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local w = redis.call('LPOP', KEYS[3])
if not w then redis.call('DEL', KEYS[1]) return 1 end
local owner = string.sub(w, 3)
redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
local f = redis.call('INCR', KEYS[2])
local g = string.sub(KEYS[3], 1, -6) .. 'grant:' .. owner
redis.call('LPUSH', g, f)
redis.call('PEXPIRE', g, ARGV[2])
return 1`)

type blockHandoff struct {
	hc, wc rueidis.Client
	ttl    string
}

// NewSketchBlockHandoff is NewSketchGrantHandoff with the waiter blocked in BLPOP (5 s timeout) on
// its own grant list instead of a subscription: rueidis (v1.0.79) sends a blocking command on a
// connection of its own and, when the context has a deadline (the runner's waits have one), the
// goroutine that sent it reads the reply itself, so the grant wakes the waiter with no hand-over
// between goroutines (a cancelable context without a deadline takes rueidis' queued path instead). A measurement, not a lock, lacking everything NewSketchGrantHandoff
// lacks.
func NewSketchBlockHandoff(s Server) (Handoff, error) {
	hc, err := s.newClient()
	if err != nil {
		return nil, err
	}
	wc, err := s.newClient()
	if err != nil {
		hc.Close()
		return nil, err
	}
	return &blockHandoff{hc: hc, wc: wc, ttl: strconv.FormatInt(TTL.Milliseconds(), 10)}, nil
}

func (*blockHandoff) Name() string { return SketchBlock }

func (g *blockHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return sketchHold(ctx, g.hc, key, g.ttl, g.release)
}

func (g *blockHandoff) release(c rueidis.Client, key, owner string) Release {
	return func(ctx context.Context) error {
		return sketchBRelease.Exec(ctx, c, sketchKeys(key), []string{owner, g.ttl}).Error()
	}
}

func (g *blockHandoff) Wait(ctx context.Context, key string) (Release, error) {
	owner := nextOwner()
	n, err := sketchWait.Exec(ctx, g.wc, sketchKeys(key), []string{owner, g.ttl, "g"}).AsInt64()
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		grant := "{" + key + "}:grant:" + owner
		if err := g.wc.Do(ctx, g.wc.B().Blpop().Key(grant).Timeout(5).Build()).Error(); err != nil {
			return nil, err
		}
	}
	return g.release(g.wc, key, owner), nil
}

func (g *blockHandoff) Close() {
	g.wc.Close()
	g.hc.Close()
}
