module github.com/coordkit/coordkit/lease

go 1.26.0

require (
	github.com/coordkit/coordkit/luakit v0.1.0
	github.com/redis/rueidis v1.0.80
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/coordkit/coordkit/luakit => ../luakit
