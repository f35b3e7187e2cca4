module github.com/coordkit/coordkit/demo

go 1.25
