// Package ratelimitbench holds the rate-limit benchmarks (go test -bench, see ../README.md).
//
// Every benchmark runs against a real server that testkit starts (Redis 8 by default; set
// COORDKIT_BENCH_TARGET=redis70 or pass -target=redis70, or point COORDKIT_REDIS_URL at a server you
// run). BenchmarkAllowN measures Keyed.AllowN decisions per second for each algorithm (fixed window,
// sliding window, token bucket, GCRA, a composite of three) on one hot key and spread over many keys.
// BenchmarkGCRAvsRedisRate runs Coordkit's GCRA and go-redis/redis_rate (the peer with the same
// algorithm) with equivalent settings on the same server in the same run and reports their ratio.
package ratelimitbench
