package contenders

import (
	"context"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
)

// The GCRA settings of every GCRA row: a burst of GCRABurst permits, one permit back per
// GCRAInterval. GCRABurst x GCRAInterval is 1000 s of debt, far more than a run admits on one key,
// so every decision admits (the write path, the slower one, for every row alike).
const (
	GCRABurst    = 1_000_000
	GCRAInterval = time.Millisecond
)

// Decider is one GCRA rate limiter: it decides one permit for key. It is safe for concurrent use.
type Decider interface {
	// Name is the contender's row name.
	Name() string
	// Decide decides one permit for key.
	Decide(ctx context.Context, key string) (allowed bool, err error)
	// Close releases the contender's clients.
	Close()
}

// DeciderSpec is a row of the GCRA contender table.
type DeciderSpec = Spec[Decider]

// Row names of the GCRA contenders (Coordkit's row is [Coordkit]).
const (
	RedisRate = "redis_rate"
	RawGCRA   = "raw-gcra"
)

// Deciders is the GCRA contender table: Coordkit's Keyed GCRA, go-redis/redis_rate and the raw
// one-script ceiling.
var Deciders = []DeciderSpec{
	{Name: Coordkit, New: NewCoordkitGCRA},
	{Name: RedisRate, New: NewRedisRate},
	{Name: RawGCRA, Ceiling: true, New: NewRawGCRA},
}

// DeciderNames returns the names of Deciders, in table order.
func DeciderNames() []string { return Names(Deciders) }

type coordkitGCRA struct {
	k *ratelimit.Keyed
	c rueidis.Client
}

// NewCoordkitGCRA returns Coordkit's ratelimit.Keyed with GCRA{Burst: GCRABurst, EmissionInterval:
// GCRAInterval} over a cache-free, auto-pipelined rueidis client: Keyed.AllowN(ctx, key, 1).
func NewCoordkitGCRA(s Server) (Decider, error) {
	c, err := s.newClient()
	if err != nil {
		return nil, err
	}
	k, err := ratelimit.NewKeyed(c, ratelimit.GCRA{Burst: GCRABurst, EmissionInterval: GCRAInterval})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &coordkitGCRA{k: k, c: c}, nil
}

func (*coordkitGCRA) Name() string { return Coordkit }

func (g *coordkitGCRA) Decide(ctx context.Context, key string) (bool, error) {
	res, err := g.k.AllowN(ctx, key, 1)
	return res.Allowed, err
}

func (g *coordkitGCRA) Close() {
	_ = g.k.Close(context.Background())
	g.c.Close()
}

type redisRate struct {
	rdb   *redis.Client
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

// NewRedisRate returns github.com/go-redis/redis_rate/v10 with the same settings
// (redis_rate.Limit{Rate: 1000, Burst: GCRABurst, Period: time.Second}) over a go-redis v9 client with
// its default pool: AllowN(ctx, key, limit, 1).
func NewRedisRate(s Server) (Decider, error) {
	rdb := redis.NewClient(s.GoRedis())
	return &redisRate{rdb: rdb, l: redis_rate.NewLimiter(rdb),
		limit: redis_rate.Limit{Rate: int(time.Second / GCRAInterval), Burst: GCRABurst, Period: time.Second}}, nil
}

func (*redisRate) Name() string { return RedisRate }

func (r *redisRate) Decide(ctx context.Context, key string) (bool, error) {
	res, err := r.l.AllowN(ctx, key, r.limit, 1)
	if err != nil {
		return false, err
	}
	return res.Allowed == 1, nil
}

func (r *redisRate) Close() { _ = r.rdb.Close() }

// rawGCRAScript is the least a GCRA decision can do in one script: read the server clock (TIME), read
// the key's theoretical arrival time (µs), admit when it is within the burst, and write the new
// one with an expiry. ARGV: emission interval µs, burst. Returns 1 admitted, 0 refused.
var rawGCRAScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + interval
if new - tonumber(ARGV[2]) * interval > now then return 0 end
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.floor((new - now) / 1000) + 1)
return 1`)

type rawGCRA struct {
	c    rueidis.Client
	args []string
}

// NewRawGCRA returns the GCRA server ceiling: one EVALSHA of a minimal GCRA script (TIME, GET, SET
// PX) through a cache-free, auto-pipelined rueidis client, same burst and interval.
func NewRawGCRA(s Server) (Decider, error) {
	c, err := s.newClient()
	if err != nil {
		return nil, err
	}
	return &rawGCRA{c: c, args: []string{strconv.FormatInt(GCRAInterval.Microseconds(), 10), strconv.Itoa(GCRABurst)}}, nil
}

func (*rawGCRA) Name() string { return RawGCRA }

func (r *rawGCRA) Decide(ctx context.Context, key string) (bool, error) {
	n, err := rawGCRAScript.Exec(ctx, r.c, []string{key}, r.args).AsInt64()
	return n == 1, err
}

func (r *rawGCRA) Close() { r.c.Close() }
