module github.com/coordkit/coordkit/bench

go 1.25
