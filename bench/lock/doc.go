// Package lockbench holds the fenced-lock benchmarks (go test -bench, see ../README.md).
//
// Every benchmark runs against a real server that testkit starts (Redis 8 by default; set
// COORDKIT_BENCH_TARGET=redis70 or pass -target=redis70, or point COORDKIT_REDIS_URL at a server you
// run). BenchmarkTryAcquireRelease measures TryAcquire+Release on a distinct key per operation, with
// one sub-benchmark per contender of the table in ../internal/contenders (Coordkit, rueidislock,
// bsm/redislock, redsync; the peer runner ../cmd/peers uses the same table). BenchmarkHandoff
// measures how long a waiting Acquire takes to get the lease after the holder's Release, with and
// without client-side-caching invalidations. BenchmarkRawEvalsha runs a minimal lock-shaped EVALSHA
// pair through the same kind of rueidis client and parallelism: the server ceiling that the others
// are read against.
package lockbench
