module github.com/coordkit/coordkit/coordctl

go 1.26.0

require (
	github.com/coordkit/coordkit/counter v0.1.0
	github.com/coordkit/coordkit/idempotency v0.1.0
	github.com/coordkit/coordkit/latch v0.1.0
	github.com/coordkit/coordkit/leader v0.1.0
	github.com/coordkit/coordkit/lease v0.1.0
	github.com/coordkit/coordkit/lock v0.1.0
	github.com/coordkit/coordkit/luakit v0.1.0
	github.com/coordkit/coordkit/ratelimit v0.1.0
	github.com/coordkit/coordkit/rwlock v0.1.0
	github.com/coordkit/coordkit/semaphore v0.1.0
	github.com/redis/rueidis v1.0.80
	github.com/spf13/cobra v1.10.2
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.44.0 // indirect
	go.opentelemetry.io/otel/metric v1.44.0 // indirect
	go.opentelemetry.io/otel/trace v1.44.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace (
	github.com/coordkit/coordkit/counter => ../counter
	github.com/coordkit/coordkit/idempotency => ../idempotency
	github.com/coordkit/coordkit/latch => ../latch
	github.com/coordkit/coordkit/leader => ../leader
	github.com/coordkit/coordkit/lease => ../lease
	github.com/coordkit/coordkit/lock => ../lock
	github.com/coordkit/coordkit/luakit => ../luakit
	github.com/coordkit/coordkit/ratelimit => ../ratelimit
	github.com/coordkit/coordkit/rwlock => ../rwlock
	github.com/coordkit/coordkit/semaphore => ../semaphore
)
