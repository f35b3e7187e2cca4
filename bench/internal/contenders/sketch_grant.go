package contenders

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
)

// SketchGrant is the name of the server-side hand-off sketch (see NewSketchGrantHandoff).
const SketchGrant = "sketch-grant"

// The sketch's scripts. sketchWait takes the lease (SET NX PX, then INCR of the fence) or, when it is
// held, appends "<channel>|<owner>" to the queue key; sketchRelease, for the lease's owner, grants the
// lease to the queue's head (SET PX, INCR) and publishes "<owner>|<fencing token>" on the head's
// channel, or deletes the lease when nobody waits.
var (
	sketchWait = rueidis.NewLuaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
redis.call('RPUSH', KEYS[3], ARGV[3] .. '|' .. ARGV[1])
return 0`)
	sketchRelease = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local w = redis.call('LPOP', KEYS[3])
if not w then redis.call('DEL', KEYS[1]) return 1 end
local bar = string.find(w, '|', 1, true)
local ch, owner = string.sub(w, 1, bar - 1), string.sub(w, bar + 1)
redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
local f = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ch, owner .. '|' .. f)
return 1`)
)

// grantHandoff is the sketch: a holder client and a waiter client, the waiter subscribed to its own
// channel for its whole life, a map from waiting owner token to the goroutine waiting for its grant.
type grantHandoff struct {
	hc, wc  rueidis.Client
	ttl     string
	channel string
	mu      sync.Mutex
	waiting map[string]chan int64
	stop    context.CancelFunc
	done    chan struct{}
}

// NewSketchGrantHandoff returns a sketch of a server-side hand-off, to measure what that design can
// reach against the invalidation-driven hand-offs (Coordkit's and rueidislock's), where the waiter
// needs one more round trip after the release: here the release script itself gives the lease to the
// queued waiter and the waiter needs only the published message. It is a measurement, not a lock: it
// has no waiter liveness (a waiter that gives up stays queued and is granted a lease nobody uses
// until its TTL), no cleanup of an uncertain outcome, no local deadline estimate (the grant runs later
// than anything the waiter sent), no counter checks and no ACL checks. Keys: lock.Keys plus
// "{key}:queue"; the waiter's channel is "sketch:grant:<n>".
func NewSketchGrantHandoff(s Server) (Handoff, error) {
	hc, err := s.newClient()
	if err != nil {
		return nil, err
	}
	wc, err := s.newClient()
	if err != nil {
		hc.Close()
		return nil, err
	}
	g := &grantHandoff{hc: hc, wc: wc, ttl: strconv.FormatInt(TTL.Milliseconds(), 10),
		channel: "sketch:grant:" + nextOwner(), waiting: map[string]chan int64{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(g.done)
		_ = wc.Receive(ctx, wc.B().Subscribe().Channel(g.channel).Build(), func(m rueidis.PubSubMessage) {
			if m.Message == "ready" {
				once.Do(func() { close(ready) })
				return
			}
			owner, f, _ := strings.Cut(m.Message, "|")
			n, _ := strconv.ParseInt(f, 10, 64)
			g.mu.Lock()
			ch := g.waiting[owner]
			g.mu.Unlock()
			if ch != nil {
				ch <- n
			}
		})
	}()
	deadline := time.After(5 * time.Second)
	for {
		_ = hc.Do(ctx, hc.B().Publish().Channel(g.channel).Message("ready").Build()).Error()
		select {
		case <-ready:
			return g, nil
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			g.Close()
			return nil, errors.New("sketch-grant: not subscribed to its channel within 5s")
		}
	}
}

func (*grantHandoff) Name() string { return SketchGrant }

// sketchKeys returns the lease, fence and queue keys of key (one hash slot).
func sketchKeys(key string) []string {
	l, f := lock.Keys(key)
	return []string{l, f, "{" + key + "}:queue"}
}

func (g *grantHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return sketchHold(ctx, g.hc, key, g.ttl, g.release)
}

// sketchHold takes the free lock of key on c for a fresh owner (ErrRawNotAcquired when it is held)
// and returns the release that release builds for it: the holder side of both sketches.
func sketchHold(ctx context.Context, c rueidis.Client, key, ttl string,
	release func(c rueidis.Client, key, owner string) Release) (Release, error) {
	owner := nextOwner()
	n, err := sketchWait.Exec(ctx, c, sketchKeys(key)[:2], []string{owner, ttl}).AsInt64()
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, ErrRawNotAcquired
	}
	return release(c, key, owner), nil
}

func (g *grantHandoff) release(c rueidis.Client, key, owner string) Release {
	return func(ctx context.Context) error {
		return sketchRelease.Exec(ctx, c, sketchKeys(key), []string{owner, g.ttl}).Error()
	}
}

func (g *grantHandoff) Wait(ctx context.Context, key string) (Release, error) {
	owner := nextOwner()
	ch := make(chan int64, 1)
	g.mu.Lock()
	g.waiting[owner] = ch
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, owner)
		g.mu.Unlock()
	}()
	n, err := sketchWait.Exec(ctx, g.wc, sketchKeys(key), []string{owner, g.ttl, g.channel}).AsInt64()
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.release(g.wc, key, owner), nil
}

func (g *grantHandoff) Close() {
	g.stop()
	<-g.done
	g.wc.Close()
	g.hc.Close()
}
