module github.com/coordkit/coordkit/lock

go 1.26.0

require (
	github.com/coordkit/coordkit/luakit v0.1.0
	github.com/redis/rueidis v1.0.80
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/coordkit/coordkit/luakit => ../luakit
