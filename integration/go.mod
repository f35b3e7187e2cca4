module github.com/coordkit/coordkit/integration

go 1.25
